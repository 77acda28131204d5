"""A tiny classic-BPF seccomp filter, built by hand so the launcher needs no library: it refuses
the terminal-injection ioctls TIOCSTI and TIOCLINUX (CVE-2017-5226 class) without taking the
controlling terminal away, so shells keep job control, and io_uring: a large kernel attack
surface whose operations (sockets, file I/O) run without passing through any syscall filter.
Programs that use io_uring (libuv, tokio-uring) fall back to ordinary syscalls when
io_uring_setup fails. Pure; stdlib only."""

from __future__ import annotations

import errno
import struct

# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
_NR, _ARCH, _ARG1_LO = 0, 4, 24  # args[1] low word on little-endian
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
X32_BIT = 0x40000000

TIOCSTI = 0x5412
TIOCLINUX = 0x541C
# io_uring_setup, io_uring_enter, io_uring_register: one number on every architecture (the
# unified syscall table all architectures share from 424 on).
IO_URING = (425, 426, 427)

# machine -> (AUDIT_ARCH, ioctl syscall number, has x32 alias space)
ARCHES = {
    "x86_64": (0xC000003E, 16, True),
    "aarch64": (0xC00000B7, 29, False),
}


def supported(machine: str) -> bool:
    return machine in ARCHES


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program(machine: str) -> bytes:
    """The filter as bytes for bwrap --seccomp FD. Raises KeyError on an unknown machine: the
    caller must fail closed rather than run without it."""
    arch, ioctl_nr, x32 = ARCHES[machine]
    deny = _ERRNO | errno.EPERM
    # Jump offsets are relative to the next instruction. Layout:
    # 0 ld arch; 1 arch?; 2 ld nr; 3 x32?; 4-6 io_uring?; 7 ioctl?; 8 ld arg1; 9 STI?; 10 LINUX?;
    # 11 allow; 12 deny
    allow, deny_at = 11, 12
    prog = [
        _ins(_LD_ABS, _ARCH),
        _ins(_JEQ, arch, 0, deny_at - 2),  # foreign arch -> deny
        _ins(_LD_ABS, _NR),
        _ins(_JGE, X32_BIT, deny_at - 4, 0) if x32 else _ins(_JEQ, 0xFFFFFFFF, deny_at - 4, 0),
        *(_ins(_JEQ, nr, deny_at - (i + 1), 0) for i, nr in enumerate(IO_URING, start=4)),
        _ins(_JEQ, ioctl_nr, 0, allow - 8),
        _ins(_LD_ABS, _ARG1_LO),  # the kernel compares the request as 32 bits
        _ins(_JEQ, TIOCSTI, deny_at - 10, 0),
        _ins(_JEQ, TIOCLINUX, deny_at - 11, 0),
        _ins(_RET, _ALLOW),
        _ins(_RET, deny),
    ]
    assert len(prog) == deny_at + 1
    return b"".join(prog)
