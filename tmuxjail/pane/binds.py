"""Binds from fds: every bind whose source lies in a tree a jail can write is opened without
following a link and handed to bubblewrap as an fd."""

from __future__ import annotations

import os

from ..subpath import inside
from .refuse import EXIT_REFUSED, EXIT_UNAVAILABLE, die

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import Any


# -- binds from fds ------------------------------------------------------------------------------
# The contract with sandbox.bwrap.wrap(): it writes plain --bind/--ro-bind[-try] SRC DEST; here,
# every such bind whose SRC lies in a tree a jail can write (the policy's workspaces, approved host
# paths and private home: agent_roots(), read from the policy the fingerprint just checked) is
# opened below its outermost root one component at a time without following a link, and handed to
# bubblewrap as --bind-fd/--ro-bind-fd FD DEST: bwrap would otherwise resolve SRC on the host,
# following whatever link a jail planted there. -try keeps its meaning (missing: no bind); a link
# anywhere below the root, or a missing non-try SRC, refuses the launch.

BIND_FD = {"--bind": "--bind-fd", "--bind-try": "--bind-fd", "--ro-bind": "--ro-bind-fd",
           "--ro-bind-try": "--ro-bind-fd"}
ARITY = dict.fromkeys((
    "--die-with-parent", "--unshare-all", "--share-net", "--unshare-user", "--unshare-user-try",
    "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup",
    "--unshare-cgroup-try", "--clearenv", "--new-session", "--as-pid-1", "--disable-userns",
    "--assert-userns-disabled"), 0)
ARITY.update(dict.fromkeys((
    "--args", "--userns", "--userns2", "--pidns", "--chdir", "--unsetenv", "--lock-file", "--sync-fd",
    "--remount-ro", "--exec-label", "--file-label", "--proc", "--dev", "--tmpfs", "--mqueue", "--dir",
    "--seccomp", "--add-seccomp-fd", "--block-fd", "--userns-block-fd", "--info-fd", "--json-status-fd",
    "--cap-add", "--cap-drop", "--perms", "--size", "--uid", "--gid", "--hostname"), 1))
ARITY.update(dict.fromkeys((
    "--setenv", "--dev-bind", "--dev-bind-try", "--bind-fd", "--ro-bind-fd", "--file", "--bind-data",
    "--ro-bind-data", "--symlink", "--chmod", *BIND_FD), 2))


def agent_roots(policy: dict[str, Any]) -> list[str]:
    # A private copy of a state file is written by the jail (through its bind): opened as a root.
    return [*policy["workspace_write"], *policy["workspace_read"], *policy["host_write"],
            *policy["host_read"], *filter(None, [policy.get("private_home")]),
            *(copy for _, copy in policy.get("state_copies", ()))]


def fd_binds(args: list[str], policy: dict[str, Any]) -> tuple[list[str], list[int]]:
    roots = agent_roots(policy)
    out: list[str] = []
    fds: list[int] = []
    i = 0
    while i < len(args) and args[i] != "--":
        op = args[i]
        if op not in ARITY:
            die(f"unexpected sandbox option {op!r} in the launch spec; refusing", EXIT_REFUSED)
        n = ARITY[op]
        if i + n >= len(args):
            die(f"sandbox option {op} lacks its arguments; refusing", EXIT_REFUSED)
        src = args[i + 1] if n else ""
        under = [r for r in roots if inside(src, r)] if op in BIND_FD else []
        if under:
            fd = open_beneath(min(under, key=len), src, optional=op.endswith("-try"))
            if fd is not None:
                fds.append(fd)
                out += [BIND_FD[op], str(fd), args[i + 2]]
        else:
            out += args[i:i + 1 + n]
        i += 1 + n
    return out + args[i:], fds


def open_beneath(root: str, path: str, optional: bool) -> int | None:
    """An O_PATH fd for path, opened from root down without following any link; None when an
    optional path is missing. The root itself is outside every tree a jail can write."""
    import stat

    rel = [c for c in path[len(root):].split("/") if c]
    if any(c in (".", "..") for c in rel) or os.path.normpath(path) != path:
        die(f"{path} is not a canonical path; refusing to bind it", EXIT_UNAVAILABLE)
    flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
    where = root
    try:
        fd = os.open(root, flags)
        for name in rel:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise NotADirectoryError
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            finally:
                os.close(fd)
            fd, where = nxt, os.path.join(where, name)
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)
            raise IsADirectoryError  # a link: refused below
    except FileNotFoundError:
        if optional:
            return None
        die(f"{path} is gone since the policy was computed; refusing to start (start a new session)",
            EXIT_UNAVAILABLE)
    except OSError:
        die(f"{where} is a symbolic link or not what was checked, inside a tree the jail can write; "
            f"refusing to bind {path} (remove the link, or start without that workspace)", EXIT_UNAVAILABLE)
    return fd
