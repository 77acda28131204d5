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
    if policy.get("mode") != "compatibility" and (tmp := session_tmp(spec.get("tmp_base"))) is not None:
        fields.update(session_tmp=tmp, realpaths={**fields.get("realpaths", {}), tmp: os.path.realpath(tmp)})
    if proxied:
        from ..net import inside

        port = tcp_port(proxy_ready(helper))
        fields["proxy_port"] = port
        env = inside.env(env, port)
    try:
        given: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        layout = HostLayout(**given)
        argv = Seatbelt().wrap(policy, list(spec["argv"]), layout)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a malformed layout (spec.verify's too)
        die(f"cannot build the Seatbelt profile for this pane: {exc}; refusing", EXIT_REFUSED)
    preflight(argv)  # before the executable's last checks: nothing runs between them and the exec
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


PROBE = "/usr/bin/true"


def preflight(argv: list[str]) -> None:
    """sandbox-exec reads the profile and runs /usr/bin/true under it first: a profile it refuses
    stops the start here, with its message in the pane and a failed start, rather than in a pane
    whose CLI never appears after the start said it was up."""
    probe = [*argv[:argv.index("--")], "--", PROBE]
    pid = os.fork()
    if pid == 0:
        try:
            os.closerange(3, 65536)
            os.execv(probe[0], probe)
        finally:
            os._exit(127)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0:
        die(f"sandbox-exec refused this session's Seatbelt profile (exit {code}); nothing was started",
            EXIT_UNAVAILABLE)


def session_tmp(base: str | None) -> str | None:
    """A strict jail's own temp dir, new and 0700, in the user's temp dir (the $TMPDIR the start
    ran with: macOS gives each user one under /var/folders, theirs alone): the jail's TMPDIR, and
    the one temp place where it may bind a unix socket. None without such a directory (the jail
    then has no TMPDIR of its own): an absolute path, no symlink at its end, the user's, that
    nobody else can write."""
    import stat

    from ..sandbox.seatbelt import SESSION_TMP_PREFIX

    if not isinstance(base, str) or not os.path.isabs(base):
        return None
    try:
        st = os.lstat(base)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    path = os.path.join(base, SESSION_TMP_PREFIX + os.urandom(6).hex())
    try:
        os.mkdir(path, 0o700)  # fails if it exists: never one somebody else made
    except OSError:
        return None
    return path


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
