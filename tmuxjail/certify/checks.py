"""Checks and what one mode's certification carries from step to step."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..registry import Mode
from .snapshot import Entry, digest

Check = dict[str, Any]  # {"check": name, "ok": bool, "observed": what was seen}


def check(name: str, ok: object, observed: object) -> Check:
    """One check; `ok` is taken for its truth (a matched pattern, a non-empty list)."""
    return {"check": name, "ok": bool(ok), "observed": observed}


@dataclass
class Trial:
    """One mode's certification: what a step found that a later step needs."""

    mode: Mode
    name: str  # the session's name
    stopped: bool = False  # a step could not go on: the rest are skipped
    info: dict[str, Any] = field(default_factory=dict)  # `start --json` of the first run
    pane: str = ""
    home_before: dict[str, Entry] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)  # what the probe reported from inside
    nested: bool | None = None  # codex: its own bwrap ran nested in ours
    probe_names: list[str] = field(default_factory=list)  # sessions started for the child process
    child_sid: str | None = None
    destinations: list[dict[str, Any]] | None = None  # what the CLI asked the proxy for (strict modes)
    state_base: Path = Path()
    tokens: dict[str, str | None] = field(default_factory=dict)

    @property
    def strict(self) -> bool:
        return self.mode.strict


def excerpt(text: str, lines: int = 14) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][:lines]


def parse_report(text: str) -> dict[str, Any]:
    """The probe's `key: value` lines; a key said more than once keeps every value, in order."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        k, _, v = line.partition(": ")
        out.setdefault(k, []).append(v)
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


def hashes(base: Path, rels: tuple[str, ...]) -> dict[str, str | None]:
    return {r: (digest(str(base / r)) if (base / r).is_file() else None) for r in rels}
