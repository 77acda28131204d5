"""Binds from fds: every bind whose source lies in a tree a jail can write is opened without
following a link and handed to bubblewrap as an fd."""

from __future__ import annotations

import os

from ..sandbox.bwrap import BIND_FD
from ..subpath import inside
from .refuse import EXIT_REFUSED, EXIT_UNAVAILABLE, die

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from ..sandbox.bwrap import Call


# -- binds from fds ------------------------------------------------------------------------------
# The contract with sandbox.bwrap's Call: the builder marks, from the policy the fingerprint just
# checked, every plain --bind/--ro-bind[-try] SRC DEST whose SRC lies in a tree a jail can write
# (the policy's workspaces, approved host paths and private home: bwrap.agent_roots), with that
# tree's outermost root (Call.beneath). Here each of those is opened below its root one component
# at a time without following a link, and handed to bubblewrap as --bind-fd/--ro-bind-fd FD DEST:
# bwrap would otherwise resolve SRC on the host, following whatever link a jail planted there.
# -try keeps its meaning (missing: no bind); a link anywhere below the root, or a missing non-try
# SRC, refuses the launch.

def fd_binds(call: Call) -> list[int]:
    """The marked binds of call, made from fds (in place); the fds, which the exec must keep."""
    fds: list[int] = []
    for i, root in call.beneath.items():
        op, src, dest = call.setup[i]
        if op not in BIND_FD or not inside(src, root):  # the builder's own mark: never, unless it broke
            die(f"sandbox option {op} {src} is not a bind beneath {root}; refusing", EXIT_REFUSED)
        fd = open_beneath(root, src, optional=op.endswith("-try"))
        if fd is not None:
            fds.append(fd)
            call.setup[i] = (BIND_FD[op], str(fd), dest)
        else:
            call.setup[i] = ()
    call.beneath = {}
    return fds


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
