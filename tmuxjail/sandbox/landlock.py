"""Landlock scoping (kernel ABI >= 6): once applied, the process and everything it execs cannot
connect to abstract unix sockets created outside its domain (the host's D-Bus, X11, ...), nor
signal processes outside it. The launcher applies it just before exec'ing bwrap. Stdlib only."""

from __future__ import annotations

import ctypes
import os
import struct

SYS_CREATE_RULESET, SYS_RESTRICT_SELF = 444, 446  # the same on x86_64 and aarch64
CREATE_RULESET_VERSION = 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2
PR_SET_NO_NEW_PRIVS = 38
MIN_ABI = 6
GUARD = "abstract-unix-sockets"


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """Landlock ABI version of the running kernel, 0 when unavailable."""
    try:
        v = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(v), 0)


def scope_self() -> None:
    """Raise OSError unless the scope is in force for this process from now on."""
    libc = _libc()
    attr = ctypes.create_string_buffer(struct.pack("<QQQ", 0, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL))
    fd = libc.syscall(SYS_CREATE_RULESET, attr, ctypes.c_size_t(24), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset: " + os.strerror(ctypes.get_errno()))
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self: " + os.strerror(ctypes.get_errno()))
    finally:
        os.close(fd)
