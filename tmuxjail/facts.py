"""The host facts a policy is resolved from, gathered by one function for both the full
resolution (plan.resolve) and the warm start (warm.record), so the two cannot disagree: where
the executable really is and how it starts, the login shell, the user, what the profile's host
paths resolve to, the guarded paths of a strict jail's workspaces, and which of tmuxjail's own
install a compatibility jail gets read-only. Stdlib only: the warm start gathers them on every
start."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from . import host, identity
from .adapters import Adapter
from .config import Config
from .context import Context
from .record import Record
from .registry import Mode

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any


class HostFacts(Record):
    at: identity.Located  # the executable, followed to where it really is
    login_shell: str
    user: str
    realpaths: dict[str, str]  # the profile's declared host paths -> their realpaths
    guards: host.Guards  # strict: every .git and trust-guarded path in the workspaces (capped: not all found)
    own_install: tuple[str, ...]  # compatibility: tmuxjail's own install, read-only in the jail


def gather(ctx: Context, provider: str, executables: tuple[str, ...], declared: list[str], mode: Mode, cfg: Config,
           workspaces: tuple[str, ...], adapter: Adapter) -> HostFacts:
    """Today's host facts of a start (raises what identity.find and identity.locate raise)."""
    path_env = ctx.env.get("PATH", os.defpath)
    if provider == "shell":
        found = Path(identity.login_shell())
    else:
        found = identity.find(executables, path_env, cfg.executables.get(provider), provider)
    at = identity.locate(adapter, found, path_env)
    guards = host.guards(workspaces) if mode.strict else host.Guards((), (), None)
    return HostFacts(at, identity.login_shell(), pwd.getpwuid(os.getuid()).pw_name, host.realpaths(declared),
                     guards, () if mode.strict else host.own_install())


def hashed_files(h: HostFacts) -> list[str]:
    """The files whose digests identify the executable (its interpreter's too)."""
    return [str(h.at.real), *([str(h.at.interpreter)] if h.at.interpreter else [])]


def record(h: HostFacts, stats: list[list[Any]]) -> dict[str, Any]:
    """The facts as the policy cache keeps them (stats: [path, *stat identity] of hashed_files)."""
    at = h.at
    return {
        "argv": list(at.argv), "install_roots": list(at.install_roots), "real": str(at.real),
        "interpreter": str(at.interpreter) if at.interpreter else None, "version": at.version,
        "stat": stats, "login_shell": h.login_shell, "user": h.user, "realpaths": dict(h.realpaths),
        "git_paths": list(h.guards.git), "trust_paths": list(h.guards.trusted), "own_install": list(h.own_install),
    }
