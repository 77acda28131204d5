"""The trust catalogue's schema (pydantic): trust.py reads the data on every start with the stdlib
only; a full resolution (plan.resolve) and the docs test validate it here, so a malformed entry
fails closed in one line before any start uses it."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import trust
from .errors import ConfigError

_PATTERN = re.compile(r"^(?:[^/*]+/)?(?:\*[^/*]+|[^/*]+\*|[^/*]+)/?$")
_ONE_LINE = r"^[^\n\r]+$"


class CatalogueEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    path: str = Field(min_length=1)
    where: Literal["workspace", "repository", "environment"]
    host: str = Field(pattern=_ONE_LINE)
    trigger: str = Field(pattern=_ONE_LINE)
    treatment: Literal["guard", "audit"]
    kind: str = Field(pattern=r"^[a-z0-9-]+$")
    reason: str = Field(pattern=_ONE_LINE, max_length=200)
    example: str = Field(min_length=1)
    fix: str | None = Field(default=None, pattern=_ONE_LINE)
    files: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    vcs: bool = False
    source: Literal["name", "git-config"] = "name"

    @field_validator("example")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in v.split("/"):
            raise ValueError("example must be a relative path inside the workspace")
        return v

    @model_validator(mode="after")
    def _shape(self) -> CatalogueEntry:
        if self.source == "name" and not _PATTERN.match(self.path):
            raise ValueError(f"path {self.path!r} is not [parent/]name[/] (name: exact, prefix* or *suffix)")
        if self.files and not self.path.endswith("/"):
            raise ValueError("files applies to a directory entry (a path ending in /)")
        return self


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    entries: tuple[CatalogueEntry, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Catalogue:
        ids = [e.id for e in self.entries]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate ids: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self


def validate(text: str | None = None) -> Catalogue:
    """The catalogue, checked; ConfigError (one line) when it is not what the schema says."""
    try:
        return Catalogue.model_validate(trust.raw(text))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"the trust catalogue ({trust.FILE}) is malformed: {where}: {first['msg']}") from None


@lru_cache(maxsize=1)
def validated() -> Catalogue:
    return validate()


# What the two peers do with each entry's path (docs/workspace-trust.md): the sandbox runtime
# behind Claude Code denies writes to a fixed list; Codex keeps .git, .codex and .agents read-only.
CLAUDE_SRT = (".gitconfig", ".gitmodules", ".bashrc", ".zshrc", ".mcp.json", ".vscode", ".idea",
              ".claude/commands", ".claude/agents", ".git/hooks", ".git/config")
CODEX = (".git", ".codex", ".agents")
PEER_OF = {  # entry id -> (Claude Code sandbox runtime, Codex)
    "git": ("denies writes to .git/hooks and .git/config only", "read-only"),
    "gitmodules": ("denies writes", "-"), "gitconfig": ("denies writes", "-"),
    "bashrc": ("denies writes", "-"), "zshrc": ("denies writes", "-"), "mcp-json": ("denies writes", "-"),
    "vscode": ("denies writes", "-"), "idea": ("denies writes", "-"),
    "claude": ("denies writes to .claude/commands and .claude/agents only", "-"),
    "codex": ("-", "read-only"), "agents": ("-", "read-only"),
}
PEER_PATH_ENTRY = {".gitconfig": "gitconfig", ".gitmodules": "gitmodules", ".bashrc": "bashrc", ".zshrc": "zshrc",
                   ".mcp.json": "mcp-json", ".vscode": "vscode", ".idea": "idea", ".claude/commands": "claude",
                   ".claude/agents": "claude", ".git/hooks": "git", ".git/config": "git", ".git": "git",
                   ".codex": "codex", ".agents": "agents"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The docs' tables, from the data (tests/unit/test_trust_catalogue.py keeps them equal)."""
    cat = validated()
    by_id = {e.id: e for e in cat.entries}
    rows = ["| path | host program | trigger | tmuxjail (strict modes) | Claude Code sandbox runtime | Codex | why |",
            "|---|---|---|---|---|---|---|"]
    for e in cat.entries:
        claude, codex = PEER_OF.get(e.id, ("-", "-"))
        mine = "read-only at start, audited" if e.treatment == "guard" else "audited"
        rows.append(f"| `{_cell(e.path)}` | {_cell(e.host)} | {_cell(e.trigger)} | {mine} | {claude} | {codex} "
                    f"| {_cell(e.reason)} |")
    rows += ["", "Every path the peers protect, and the entry that covers it here:", "",
             "| path | Claude Code sandbox runtime | Codex | tmuxjail entry | tmuxjail (strict modes) |",
             "|---|---|---|---|---|"]
    for path in dict.fromkeys((*CLAUDE_SRT, *CODEX)):
        e = by_id[PEER_PATH_ENTRY[path]]
        mine = "read-only at start, audited" if e.treatment == "guard" else "audited"
        rows.append(f"| `{path}` | {'denies writes' if path in CLAUDE_SRT else '-'} | "
                    f"{'read-only' if path in CODEX else '-'} | `{_cell(e.path)}` | {mine} |")
    return "\n".join(rows) + "\n"
