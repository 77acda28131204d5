"""Can this host enforce the mode: the sandbox it gives a jail of one mode, checked on every
start, warm or not, and failing closed (bubblewrap or sandbox-exec, seccomp, Landlock, the pids
cgroup). Apart from the request (request.py), which the early pane builds before any of this is
loaded (sessions/early.py)."""

from __future__ import annotations

import os

from . import hostos
from .errors import SandboxUnavailable
from .record import Record
from .registry import Mode
from .sandbox import bwrap, landlock, pids
from .sandbox.seccomp import supported

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from .config import Config
    from .sandbox.seatbelt import Seatbelt


class Sandbox(Record):
    """The sandbox this host gives a jail of one mode: the backend, and whether there is none at
    all (compatibility-unguarded, an operator's opt-in: `why` says what is missing)."""

    backend: bwrap.Bwrap | Seatbelt
    unguarded: bool
    why: str | None


def sandbox(cfg: Config, mode: Mode) -> Sandbox:
    """Fail closed on a host that cannot enforce the mode (checked on every start, warm or not)."""
    backend: bwrap.Bwrap | Seatbelt
    if hostos.darwin():
        from .sandbox import seatbelt

        backend, hint = seatbelt.find(), "sandbox-exec ships with macOS (/usr/bin/sandbox-exec): run `tmuxjail doctor`"
    else:
        backend, hint = bwrap.find(), "sudo apt-get install -y bubblewrap   (then: tmuxjail doctor)"
    unguarded = False
    if (why := backend.available()) is not None:
        if mode is Mode.compatibility and cfg.allow_unguarded_compatibility:
            unguarded = True
        else:
            raise SandboxUnavailable(f"{mode.value} mode cannot be enforced: {why}", hint=hint)
    if hostos.darwin():
        # macOS has no seccomp, Landlock or pids cgroup to check: the Seatbelt profile stands for
        # them (docs/macos.md).
        return Sandbox(backend, unguarded, why)
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
