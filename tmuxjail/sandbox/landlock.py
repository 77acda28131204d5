"""Landlock scoping (kernel ABI >= 6): once applied, the process and everything it execs cannot
connect to abstract unix sockets created outside its domain (the host's D-Bus, X11, ...), nor
signal processes outside it. The launcher applies it just before exec'ing bwrap. Stdlib only."""

from __future__ import annotations

import os
import struct

from . import libc

SYS_CREATE_RULESET, SYS_RESTRICT_SELF = 444, 446  # the same on x86_64 and aarch64
CREATE_RULESET_VERSION = 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
PR_SET_NO_NEW_PRIVS = 38
MIN_ABI = 6
GUARD = "abstract-unix-sockets"


def abi() -> int:
    """Landlock ABI version of the running kernel, 0 when unavailable."""
    try:
        v = libc.syscall(SYS_CREATE_RULESET, None, libc.c_size_t(0), libc.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(v), 0)


def scope_self() -> None:
    """Raise OSError unless the scope is in force for this process from now on."""
    attr = struct.pack("<QQQ", 0, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    fd = libc.syscall(SYS_CREATE_RULESET, attr, libc.c_size_t(24), libc.c_uint32(0))
    if fd < 0:
        raise OSError(libc.get_errno(), "landlock_create_ruleset: " + os.strerror(libc.get_errno()))
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(libc.get_errno(), "prctl(NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, fd, libc.c_uint32(0)) != 0:
            raise OSError(libc.get_errno(), "landlock_restrict_self: " + os.strerror(libc.get_errno()))
    finally:
        os.close(fd)
