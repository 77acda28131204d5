"""A tiny classic-BPF seccomp filter, built by hand so the launcher needs no library: it refuses
the terminal-injection ioctls TIOCSTI and TIOCLINUX (CVE-2017-5226 class) without taking the
controlling terminal away, so shells keep job control. Pure; stdlib only."""

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
    # 0 ld arch; 1 arch? ; 2 ld nr; 3 x32?; 4 ioctl?; 5 ld arg1; 6 STI?; 7 LINUX?; 8 allow; 9 deny
    prog = [
        _ins(_LD_ABS, _ARCH),
        _ins(_JEQ, arch, 0, 7),  # foreign arch -> deny
        _ins(_LD_ABS, _NR),
        _ins(_JGE, X32_BIT, 5, 0) if x32 else _ins(_JEQ, 0xFFFFFFFF, 5, 0),
        _ins(_JEQ, ioctl_nr, 0, 3),
        _ins(_LD_ABS, _ARG1_LO),  # the kernel compares the request as 32 bits
        _ins(_JEQ, TIOCSTI, 2, 0),
        _ins(_JEQ, TIOCLINUX, 1, 0),
        _ins(_RET, _ALLOW),
        _ins(_RET, deny),
    ]
    return b"".join(prog)
