"""What a start asks for (StartRequest: one type from the command line to the store), and what
every resolution checks before a policy exists: the canonical workspaces, the env name, the mode,
and the sandbox's preconditions on this host.
Stdlib only (no pydantic): the warm start (warm.py) runs all of it on every start, cached or not,
and plan.resolve runs the same functions."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .errors import UsageError
from .record import Record
from .registry import Mode

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

    from .config import Config

ENV_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
# The private home of `tmuxjail login`'s own jail: never given the stored login (it makes it).
LOGIN_ENV = "tmuxjail-login"


class StartRequest(Record):
    """One start, as the CLI, the API, the menus and discover ask for it: built once (build()
    canonicalises the workspaces), then taken as it is by plan.resolve, the warm start and the
    store (to_json/from_json: the session row's request column). A NamedTuple, not a dataclass:
    the warm start never loads dataclasses (and inspect with it)."""

    provider: str
    mode: str | None = None  # as asked (None: the config's default); the stored request's is the resolved one
    workspaces: tuple[str, ...] = ()  # canonical absolute paths once built; the first is the cwd
    name: str | None = None
    env_name: str = "default"
    capabilities: tuple[str, ...] = ()
    detach: bool = False
    non_interactive: bool = False
    dry_run: bool = False
    args: tuple[str, ...] = ()
    backend: str | None = None
    restriction: dict | None = None
    network: str | None = None
    trace: str | None = None  # a discovery run: where the launcher's strace writes (commands/discovery.py)
    candidate: str | None = None  # an approved discovery candidate as the profile
    allow_domains: tuple[str, ...] | None = None  # --allow-domain (None: none given)
    placement: str | None = None  # "window" (--here) or "split" (--split): it joins the current tmux session
    worktree: dict | None = None  # --worktree: what worktree.create made (docs/worktrees.md)
    mcp: tuple[str, ...] = ()  # --mcp: names of the operator's [mcp.NAME] servers (mcpconf)

    @classmethod
    def build(cls, cwd: str, provider: str, **fields: Any) -> StartRequest:
        """The request, its workspaces canonical (relative ones from cwd; none given: cwd)."""
        req = cls(provider, **fields)
        return req._replace(workspaces=canonical_workspaces(tuple(req.workspaces), cwd))

    def to_json(self) -> str:
        """What the store keeps of a start (the row's request column): what a resume needs again."""
        data: dict[str, Any] = {
            "provider": self.provider, "mode": self.mode, "workspaces": list(self.workspaces),
            "env_name": self.env_name, "capabilities": list(self.capabilities), "args": list(self.args),
            "restriction": self.restriction, "network": self.network,
            "allow_domains": None if self.allow_domains is None else list(self.allow_domains)}
        if self.candidate is not None:
            data["candidate"] = self.candidate
        if self.placement is not None:
            data["placement"] = self.placement
        if self.worktree is not None:
            data["worktree"] = self.worktree
        if self.mcp:
            data["mcp"] = list(self.mcp)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> StartRequest:
        """A stored request, from any version's row (keys added since default to what those rows
        meant); ValueError, saying what is wrong, for one that cannot be read."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            raise ValueError("not JSON") from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        for key, kinds in _STORED.items():
            if key not in data:
                if key in _REQUIRED:
                    raise ValueError(f"{key!r} is missing")
                continue
            v = data[key]
            ok = all(isinstance(x, str) for x in v) if isinstance(v, list) else True
            if not (isinstance(v, kinds) and ok):
                raise ValueError(f"{key!r} is not what a request holds there ({type(v).__name__})")
        if not data["workspaces"]:
            raise ValueError("'workspaces' is empty")
        doms = data.get("allow_domains")
        return cls(provider=data["provider"], mode=data["mode"], workspaces=tuple(data["workspaces"]),
                   env_name=data["env_name"], capabilities=tuple(data.get("capabilities") or ()),
                   args=tuple(data.get("args") or ()), restriction=data.get("restriction"),
                   network=data.get("network"), allow_domains=None if doms is None else tuple(doms),
                   candidate=data.get("candidate"), placement=data.get("placement"),
                   worktree=_worktree(data.get("worktree")), mcp=tuple(data.get("mcp") or ()))


# The stored request's keys and their JSON types (list: of strings); older rows lack the later ones.
_STORED: dict[str, tuple[type, ...]] = {
    "provider": (str,), "mode": (str,), "workspaces": (list,), "env_name": (str,), "capabilities": (list,),
    "args": (list,), "restriction": (dict, type(None)), "network": (str, type(None)),
    "allow_domains": (list, type(None)), "candidate": (str, type(None)), "placement": (str, type(None)),
    "worktree": (dict, type(None)), "mcp": (list,)}
_REQUIRED = ("provider", "mode", "workspaces", "env_name")
WORKTREE_KEYS = ("id", "name", "branch", "base", "repo", "common", "objects", "path", "gitdir", "import")


def _worktree(data: dict | None) -> dict | None:
    if data is not None and not all(isinstance(data.get(k), str) for k in WORKTREE_KEYS):
        raise ValueError("'worktree' lacks what a worktree holds")
    return data


def canonical_workspaces(raw: tuple[str, ...], cwd: str) -> tuple[str, ...]:
    out = []
    for ws in raw or (cwd,):
        if not ws.isprintable():
            raise UsageError(f"workspace {ws!r}: control characters are not accepted in paths")
        p = Path(ws).expanduser()
        if not p.is_absolute():
            p = Path(cwd, p)
        if not p.exists():
            raise UsageError(f"workspace {p} does not exist")
        if not p.is_dir():
            raise UsageError(f"workspace {p} is not a directory")
        real = os.path.realpath(p)
        if not real.isprintable():  # a link to such a name
            raise UsageError(f"workspace {real!r}: control characters are not accepted in paths")
        out.append(real)
    return tuple(dict.fromkeys(out))


def check_env_name(env_name: str) -> None:
    if not ENV_NAME_RE.match(env_name):
        raise UsageError(f"invalid --env {env_name!r}", hint="use letters, digits, '-' or '_'")


def mode_of(mode_name: str | None, cfg: Config) -> Mode:
    mode_name = mode_name or cfg.default_mode
    try:
        return Mode(mode_name)
    except ValueError:
        raise UsageError(f"unknown mode {mode_name!r}") from None
