"""The catalogue of host-trusted paths (trust-catalogue.json, docs/workspace-trust.md): what in a
workspace a host program runs or trusts, and whether a strict jail gets it read-only (`guard`) or
the audit reports it (`audit`). This module reads the data with the stdlib only (it runs on every
strict start, warm ones included) and matches names; catalogue.py validates the same data with
pydantic on every full resolution, so a malformed file never reaches a start unnoticed.

A path pattern is `[parent/]name[/]`: `name` is exact, `prefix*` or `*suffix`; `parent`, when
given, is the exact name of the directory holding it; a trailing `/` means a directory, all of
which the entry covers. Entries whose `source` is `git-config` are found by reading the guarded
git configs (gitconfig.targets), not by name."""

from __future__ import annotations

import json
import os
from functools import lru_cache

from .errors import ConfigError
from .record import Record

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

FILE = "trust-catalogue.json"
# Directories the walks do not list in full (dependencies, caches, build output): inside them
# they look only for catalogue names and repositories, down to HEAVY_DEPTH levels below each
# such name (a nested one starts again), plus the top of every site-packages.
HEAVY_DIRS = frozenset({"node_modules", ".venv", "venv", "target", "__pycache__", ".tox", ".mypy_cache",
                        ".pytest_cache", ".cache", ".nox", ".direnv"})
HEAVY_DEPTH = 3
SITE_DIRS = frozenset({"site-packages", "dist-packages"})
VCS_DIRS = frozenset({".git", ".hg", ".jj", ".sl"})
FIX = {"guard": "it was made or changed during the session (existing ones were read-only): "
                "read it before {trigger}, and delete it if you did not ask for it",
       "audit": "read it before {trigger}; revert what you did not ask for"}


class Entry(Record):
    id: str
    kind: str
    treatment: str
    trigger: str
    fix: str
    parent: str | None
    name: str  # exact name, or the fixed part of a prefix*/*suffix pattern
    shape: str  # "exact", "prefix" or "suffix"
    is_dir: bool
    files: tuple[str, ...]  # a directory entry: only these names inside it (empty: all)
    keys: tuple[str, ...]  # a JSON file: only these top-level keys count
    vcs: bool  # lifted by git-metadata-write rather than workspace-trust-write
    source: str


class Catalogue:
    def __init__(self, entries: list[Entry]):
        self.entries = entries
        named = [e for e in entries if e.source == "name"]
        self.exact: dict[str, list[Entry]] = {}
        for e in named:
            if e.shape == "exact":
                self.exact.setdefault(e.name, []).append(e)
        self.prefixes = tuple(e.name for e in named if e.shape == "prefix")
        self.suffixes = tuple(e.name for e in named if e.shape == "suffix")
        self.affixed = [e for e in named if e.shape != "exact"]
        self.by_id = {e.id: e for e in entries}
        self.guarded_names = frozenset(e.name for e in named if e.treatment == "guard" and e.shape == "exact")

    def maybe(self, name: str) -> bool:
        """Whether match() could return an entry for this name (the walks' fast miss)."""
        return name in self.exact or name.startswith(self.prefixes) or name.endswith(self.suffixes)

    def match(self, name: str, parent: str, is_dir: bool) -> Entry | None:
        """The entry naming `name` (in a directory called `parent`), or None. Cheap on a miss:
        one dict lookup and two C-level affix tests, as the walk calls it for every name."""
        for e in self.exact.get(name, ()):
            if e.is_dir == is_dir and (e.parent is None or e.parent == parent):
                return e
        if name.startswith(self.prefixes) or name.endswith(self.suffixes):
            for e in self.affixed:
                hit = name.startswith(e.name) if e.shape == "prefix" else name.endswith(e.name)
                if hit and name != e.name and e.is_dir == is_dir and (e.parent is None or e.parent == parent):
                    return e
        return None

    def finding(self, e: Entry) -> dict[str, str]:
        """The keys every finding of this entry carries (the audit's contract: trigger, fix)."""
        return {"trigger": e.trigger, "fix": e.fix, "entry": e.id}


def descend(name: str, below_heavy: int, site: bool = False) -> int | None:
    """Whether a walk enters directory `name`, and its depth below a HEAVY_DIRS name (-1: not
    below one); None: not entered. A HEAVY_DIRS name starts the count again, so a nested one
    (node_modules/x/node_modules) is looked into too. site: also enter every site-packages
    (the audit's .pth files), wherever it lies."""
    if name in HEAVY_DIRS:
        return 0
    if below_heavy < 0:
        return -1
    if below_heavy + 1 < HEAVY_DEPTH or name in VCS_DIRS or (site and name in SITE_DIRS):
        return below_heavy + 1
    return None


def _compile(raw: dict[str, Any]) -> Entry:
    path = raw["path"]
    source = raw.get("source", "name")
    is_dir = path.endswith("/")
    parent, _, name = path.rstrip("/").rpartition("/")
    shape = "exact"
    if source == "name":
        if name.startswith("*"):
            shape, name = "suffix", name[1:]
        elif name.endswith("*"):
            shape, name = "prefix", name[:-1]
        if not name or "*" in name or "*" in parent or "/" in parent:
            raise ValueError(f"entry {raw['id']!r}: path {path!r} is not [parent/]name[/]")
    if raw["treatment"] not in FIX:
        raise ValueError(f"entry {raw['id']!r}: treatment {raw['treatment']!r} is not guard or audit")
    trigger = str(raw["trigger"])
    return Entry(str(raw["id"]), str(raw["kind"]), raw["treatment"], trigger,
                 str(raw.get("fix") or FIX[raw["treatment"]].format(trigger=trigger)), parent or None, name,
                 shape, is_dir, tuple(raw.get("files", ())), tuple(raw.get("keys", ())), bool(raw.get("vcs")),
                 source)


def raw(text: str | None = None) -> dict[str, Any]:
    if text is None:
        try:
            with open(os.path.join(os.path.dirname(__file__), FILE), encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"the trust catalogue ({FILE}) cannot be read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"the trust catalogue ({FILE}) is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"the trust catalogue ({FILE}) is not a JSON object")
    return data


def compile_catalogue(data: dict[str, Any]) -> Catalogue:
    """Fail closed, in one line: a walk with half a catalogue would guard less than it says."""
    try:
        entries = [_compile(e) for e in data["entries"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"the trust catalogue ({FILE}) is malformed: {exc}") from None
    return Catalogue(entries)


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    return compile_catalogue(raw())
