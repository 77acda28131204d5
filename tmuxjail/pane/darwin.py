"""The launcher's macOS path (hostos.darwin(); Seatbelt): after the same fingerprint, store and
executable checks as on Linux, it builds the Seatbelt profile from the fingerprinted policy and the
spec's host layout (plus the pane's tty and the session proxy's loopback port, which only it
knows) and execs sandbox-exec with the profile, its parameters and the CLI. Linux's kernel guards
(seccomp, Landlock, the session keyring, namespaces, the pids cgroup) have no macOS counterpart
here: the profile is the whole boundary (docs/macos.md says what that leaves out)."""

from __future__ import annotations

import os

from .executable import exe_checked, exe_unchanged, open_executables
from .helper import ask_helper, proxy_ready, store_holds
from .refuse import EXIT_REFUSED, EXIT_UNAVAILABLE, die
from .spec import verify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from .helper import Helper

# What the launcher writes to the start's status file just before it execs sandbox-exec (on
# Linux bubblewrap writes its own report there): the start counts as up from then on.
STATUS = "sandbox-exec"


def run(spec: dict[str, Any], policy: dict[str, Any], spec_path: str, expected: str, helper: Helper,
        exec_closing: Callable[[list[str], dict[str, str], tuple[int, ...]], NoReturn]) -> NoReturn:
    from .. import hostos
    from ..errors import INSIDE_JAIL
    from ..sandbox import HostLayout
    from ..sandbox.seatbelt import Seatbelt

    if not hostos.darwin():  # Linux: this would run the CLI without bubblewrap and its kernel guards
        die("this pane's policy is for macOS (Seatbelt), and this host is not macOS; refusing", EXIT_REFUSED)
    if "trace" in spec:  # discovery (strace) is Linux's; the helper would detach its proxy for one
        die("the launch spec's trace does not follow from this pane's policy (tampered); refusing", EXIT_REFUSED)
    proxied = policy.get("network") == "proxy"
    exe = open_executables(policy) if policy.get("mode") != "compatibility" else []
    ask_helper(helper, spec, policy, proxied, [[path, key] for path, _, _, key in exe])
    verify(spec, policy, spec_path)
    env = {k: str(v) for k, v in spec["env"].items()}
    if os.environ.get("TERM"):
        env["TERM"] = os.environ["TERM"]
    env[INSIDE_JAIL] = "1"
    exe_checked(exe, store_holds(helper, expected))
    fields: dict[str, Any] = dict(spec["layout"])
    fields.update(tty=os.ttyname(0) if os.isatty(0) else None, proxy_port=None)
    if proxied:
        from ..net import bridge as netbridge

        port = tcp_port(proxy_ready(helper))
        fields["proxy_port"] = port
        env = netbridge.env(env, port)
    try:
        given: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        layout = HostLayout(**given)
        argv = Seatbelt().wrap(policy, list(spec["argv"]), layout)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a malformed layout (spec.verify's too)
        die(f"cannot build the Seatbelt profile for this pane: {exc}; refusing", EXIT_REFUSED)
    exe_unchanged(exe)
    for path, _, fd, _ in exe:  # sandbox-exec runs the CLI by its path: the checked file must be there
        st, at = os.fstat(fd), _lstat(path)
        if at is None or (at.st_dev, at.st_ino) != (st.st_dev, st.st_ino):
            die(f"the CLI's executable {path} was replaced while this jail was being started; refusing "
                "to run it", EXIT_REFUSED)
    status = os.open(spec["status_file"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.write(status, f'{{"{STATUS}": {os.getpid()}}}\n'.encode())
    os.close(status)
    exec_closing(argv, env, ())


def tcp_port(where: str) -> int:
    """The proxy's loopback port from its ready line (net/listen.py: tcp:127.0.0.1:PORT)."""
    scheme, _, rest = where.partition(":")
    host, _, port = rest.rpartition(":")
    if scheme != "tcp" or host != "127.0.0.1" or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        die(f"the session's proxy reported {where!r}, not a loopback port; refusing", EXIT_UNAVAILABLE)
    return int(port)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(os.path.realpath(path))
    except OSError:
        return None
