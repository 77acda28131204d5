"""The launcher narrows itself before it execs bubblewrap: a fresh session keyring, a root-run
jail's pids cgroup, the jail's own user and mount namespace with its limits, the seccomp program."""

from __future__ import annotations

import os

from .refuse import EXIT_UNAVAILABLE, die

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import Any


def seccomp_fd(machine: str, strict: bool = True) -> int:
    from ..sandbox.seccomp import program

    try:
        prog = program(machine, strict)
    except KeyError:
        die(f"no seccomp filter for machine {machine!r}; refusing to run without it", EXIT_UNAVAILABLE)
    fd = os.memfd_create("tmuxjail-seccomp", 0)
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


KEYCTL = {"x86_64": 250, "aarch64": 219}
KEYCTL_JOIN_SESSION_KEYRING = 1


def own_session_keyring() -> None:
    """Join a fresh anonymous session keyring, so the jail does not possess the host session's
    keys (Kerberos KEYRING caches, AFS tokens; the kernel also uses them on the process's behalf,
    e.g. for network filesystems). Inside, seccomp refuses the keyring syscalls altogether."""
    import errno

    from ..sandbox import libc

    machine = os.uname().machine  # platform.machine(), without importing platform (re, ...)
    nr = KEYCTL.get(machine)
    if nr is None:
        die(f"no keyctl number for {machine}; refusing to share the host's keyring", EXIT_UNAVAILABLE)
    if libc.syscall(nr, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        err = libc.get_errno()
        if err not in (errno.ENOSYS, errno.EPERM):  # no keyrings here, or a filter above us denies them
            die(f"cannot give the jail its own session keyring: {os.strerror(err)}", EXIT_UNAVAILABLE)


def root_process_limit(policy: dict[str, Any], session_id: str) -> None:
    """RLIMIT_NPROC means nothing to uid 0: a root-run jail gets a pids cgroup instead. A host
    without a pids controller was refused (or accepted by the operator) at start."""
    from ..sandbox import pids

    nproc = (policy.get("limits") or {}).get("nproc")
    if not nproc or pids.hierarchy() is None:
        return
    try:
        pids.join(int(nproc), pids_group(session_id, os.getpid()))
    except OSError as exc:
        die(f"cannot put this root-run jail into its pids cgroup: {exc}", EXIT_UNAVAILABLE)


CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
MS_NOSUID, MS_NOEXEC, MS_REC, MS_SLAVE = 2, 8, 1 << 14, 1 << 19


def own_namespace(policy: dict[str, Any]) -> None:
    """The jail's own user and mount namespace, made here and entered before bwrap, which nests
    its own in it: the kernel checks a per-user count at every namespace level, so the lowered
    /proc/sys/user/* values (the jail's share, budget.py) bind everything bwrap and the jail make.
    Set while this process holds the namespace's capabilities; exec drops them (uid != 0), and a
    root-run bwrap drops them for the jail, whose own namespace is a child of this one: nothing
    in the jail can raise them again. In the same mount namespace, a devpts of the jail's own with
    max= (bwrap's has none): the bwrap argv binds it at /dev/pts. Before fd_binds: bwrap can bind
    from an fd only a mount of its own namespace."""
    lim = policy.get("limits") or {}
    counts, ptys = lim.get("user") or [], lim.get("ptys", -1)
    if not counts and ptys < 0:
        return  # a policy without the jail's share (or one whose config accepts its absence)
    try:
        enter_own_namespace(counts, int(ptys))
    except (OSError, ValueError) as exc:
        die(f"cannot give the jail its own user namespace and limits ({getattr(exc, 'filename', None) or 'limits'}: "
            f"{getattr(exc, 'strerror', None) or exc}); refusing to start it without them (see `tmuxjail doctor`; "
            'to run jails without them: accept_missing_guards = ["jail-namespace-limits"] in the config)',
            EXIT_UNAVAILABLE)


def enter_own_namespace(counts: list[Any], ptys: int) -> None:
    """own_namespace()'s work (also tried by `tmuxjail doctor`, in a child); OSError names the step."""
    from ..sandbox import libc

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = libc.get_errno()
            raise OSError(err, os.strerror(err), what)

    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
    # The caller's own ids only, as bwrap maps them in its namespace (root's too: a process inside
    # may map only itself).
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as f:
            f.write(text)
    for name, value in counts:
        with open("/proc/sys/user/" + str(name), "w") as f:
            f.write(str(int(value)))
    check(libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None), "mount propagation")
    if ptys >= 0:
        check(libc.mount(b"devpts", b"/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC,
                         f"newinstance,ptmxmode=0666,mode=620,max={ptys}".encode()), "devpts")


def pids_group(session_id: str, launcher: int) -> str:
    """The pids cgroup of a root-run launch: its launcher, bwrap, the jail, and the proxy."""
    return "".join(c for c in session_id if c.isalnum() or c in "-_")[:64] + f"-{launcher}"
