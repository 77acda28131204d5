"""What a start asks for, and what every resolution checks before a policy exists: the options,
the canonical workspaces, the env name, the mode, and the sandbox's preconditions on this host.
Stdlib only (no pydantic): the warm start (warm.py) runs all of it on every start, cached or not,
and plan.resolve runs the same functions."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from .config import Config
from .errors import SandboxUnavailable, UsageError
from .registry import Mode
from .sandbox import bwrap, landlock, pids
from .sandbox.seccomp import supported

ENV_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


class StartOptions(NamedTuple):
    provider: str
    mode: str | None = None
    workspaces: tuple[str, ...] = ()
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
    trace: str | None = None  # a discovery run: where the launcher's strace writes (discover/run.py)
    candidate: str | None = None  # an approved discovery candidate as the profile
    allow_domains: tuple[str, ...] | None = None  # --allow-domain (None: none given)


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


class Sandbox(NamedTuple):
    """The sandbox this host gives a jail of one mode: the backend, and whether there is none at
    all (compatibility-unguarded, an operator's opt-in: `why` says what is missing)."""

    backend: bwrap.Bwrap
    unguarded: bool
    why: str | None


def sandbox(cfg: Config, mode: Mode) -> Sandbox:
    """Fail closed on a host that cannot enforce the mode (checked on every start, warm or not)."""
    backend = bwrap.find()
    unguarded = False
    if (why := backend.available()) is not None:
        if mode is Mode.compatibility and cfg.allow_unguarded_compatibility:
            unguarded = True
        else:
            raise SandboxUnavailable(
                f"{mode.value} mode cannot be enforced: {why}",
                hint="sudo apt-get install -y bubblewrap   (then: tmuxjail doctor)",
            )
    if not unguarded and not supported(os.uname().machine):
        raise SandboxUnavailable(f"no seccomp filter for {os.uname().machine}; the jail cannot block TIOCSTI here")
    if mode.strict and landlock.abi() < landlock.MIN_ABI and landlock.GUARD not in cfg.accept_missing_guards:
        raise SandboxUnavailable(
            f"this kernel's Landlock (ABI {landlock.abi()}) cannot keep the jail off the host's abstract unix sockets",
            hint=f'upgrade to Linux 6.12+, or accept the gap: accept_missing_guards = ["{landlock.GUARD}"] in the config',
        )
    if not unguarded:
        check_root_process_limit(cfg)
    return Sandbox(backend, unguarded, why)


def check_root_process_limit(cfg: Config) -> None:
    """A root-run jail's process limit needs a pids cgroup (the kernel ignores RLIMIT_NPROC for
    uid 0): refuse when there is none, unless the operator accepted the gap."""
    if os.getuid() == 0 and pids.hierarchy() is None and pids.GUARD not in cfg.accept_missing_guards:
        raise SandboxUnavailable(
            "a root-run jail needs a pids cgroup for its process limit, and this host has none",
            hint=f'run tmuxjail as an ordinary user, or accept the gap: accept_missing_guards = ["{pids.GUARD}"] in the config',
        )
