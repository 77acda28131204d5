"""A small classic-BPF seccomp filter, built by hand so the launcher needs no library. Pure;
stdlib only. It refuses, in every mode:

- the terminal-injection ioctls TIOCSTI and TIOCLINUX (CVE-2017-5226 class), without taking the
  controlling terminal away, so shells keep job control;
- io_uring: a large kernel attack surface whose operations run without passing this filter
  (libuv, tokio-uring fall back to ordinary syscalls when io_uring_setup fails);
- setuid/setgid bits: chmod/fchmod/fchmodat/fchmodat2, and the calls that create a file with a
  mode (open/openat/creat with O_CREAT or O_TMPFILE, mknod/mknodat), when the mode has S_ISUID
  or S_ISGID. The file would live on the host's disk: run by root, that is a setuid-root binary
  for every local user. openat2 (its mode sits in a struct the filter cannot read) answers
  ENOSYS, and callers fall back to openat;
- the kernel keyrings (add_key, request_key, keyctl: ENOSYS, "no keyring support"): the session
  and user keyrings are shared with the host and may hold Kerberos, AFS or ecryptfs secrets.

and in strict modes also perf_event_open (kernel surface agents do not need). New user
namespaces are refused by bwrap --disable-userns (the kernel's per-namespace count), not here:
one guard that a test can pin, and clone3, whose flags this filter could not read, keeps working.
"""

from __future__ import annotations

import errno
import struct

# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
_NR, _ARCH, _ARGS = 0, 4, 16  # an argument's low word (little-endian) is at _ARGS + 8 * index
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
X32_BIT = 0x40000000

TIOCSTI = 0x5412
TIOCLINUX = 0x541C
SUID_SGID = 0o6000
O_CREAT_OR_TMPFILE = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE (same on x86_64 and aarch64)

# machine -> (AUDIT_ARCH, has x32 alias space)
ARCHES = {
    "x86_64": (0xC000003E, True),
    "aarch64": (0xC00000B7, False),
}

# Syscall numbers (None: the architecture does not have it). From 424 on, one unified table.
SYSCALLS = {
    #                  x86_64, aarch64
    "ioctl":           (16, 29),
    "io_uring_setup":  (425, 425),
    "io_uring_enter":  (426, 426),
    "io_uring_register": (427, 427),
    "chmod":           (90, None),
    "fchmod":          (91, 52),
    "fchmodat":        (268, 53),
    "fchmodat2":       (452, 452),
    "open":            (2, None),
    "creat":           (85, None),
    "openat":          (257, 56),
    "openat2":         (437, 437),
    "mknod":           (133, None),
    "mknodat":         (259, 33),
    "add_key":         (248, 217),
    "request_key":     (249, 218),
    "keyctl":          (250, 219),
    "perf_event_open": (298, 241),
}

# A rule: (syscall, errno, conditions). The call is refused when every condition holds; a
# condition is (argument index, "set" = any of these bits | "eq" = equal to). Several rules for
# one syscall are alternatives.
EPERM, ENOSYS = errno.EPERM, errno.ENOSYS
Rule = tuple[str, int, tuple[tuple[int, str, int], ...]]
EVERY_MODE: tuple[Rule, ...] = (
    ("ioctl", EPERM, ((1, "eq", TIOCSTI),)),
    ("ioctl", EPERM, ((1, "eq", TIOCLINUX),)),
    ("io_uring_setup", EPERM, ()),
    ("io_uring_enter", EPERM, ()),
    ("io_uring_register", EPERM, ()),
    ("chmod", EPERM, ((1, "set", SUID_SGID),)),
    ("fchmod", EPERM, ((1, "set", SUID_SGID),)),
    ("fchmodat", EPERM, ((2, "set", SUID_SGID),)),
    ("fchmodat2", EPERM, ((2, "set", SUID_SGID),)),
    ("creat", EPERM, ((1, "set", SUID_SGID),)),
    ("open", EPERM, ((1, "set", O_CREAT_OR_TMPFILE), (2, "set", SUID_SGID))),
    ("openat", EPERM, ((2, "set", O_CREAT_OR_TMPFILE), (3, "set", SUID_SGID))),
    ("openat2", ENOSYS, ()),
    ("mknod", EPERM, ((1, "set", SUID_SGID),)),
    ("mknodat", EPERM, ((2, "set", SUID_SGID),)),
    ("add_key", ENOSYS, ()),
    ("request_key", ENOSYS, ()),
    ("keyctl", ENOSYS, ()),
)
STRICT_ONLY: tuple[Rule, ...] = (
    ("perf_event_open", EPERM, ()),
)


def supported(machine: str) -> bool:
    return machine in ARCHES


# One BPF instruction before assembly: a jump target is an offset or a label resolved later.
Ins = tuple[int, int | str, int | str, int]


def _ins(code: int, k: int, jt: int | str = 0, jf: int | str = 0) -> Ins:
    return (code, jt, jf, k)


def rules(strict: bool) -> tuple[Rule, ...]:
    return EVERY_MODE + (STRICT_ONLY if strict else ())


def program(machine: str, strict: bool = True) -> bytes:
    """The filter as bytes for bwrap --seccomp FD. Raises KeyError on an unknown machine: the
    caller must fail closed rather than run without it."""
    arch, x32 = ARCHES[machine]
    col = 0 if machine == "x86_64" else 1
    prog: list[Ins] = [
        _ins(_LD_ABS, _ARCH),
        _ins(_JEQ, arch, 0, "deny"),  # foreign arch -> deny
        _ins(_LD_ABS, _NR),
        _ins(_JGE, X32_BIT, "deny", 0) if x32 else _ins(_JEQ, 0xFFFFFFFF, "deny", 0),
    ]
    labels: dict[str, int] = {}
    for i, (name, err, conds) in enumerate(rules(strict)):
        nr = SYSCALLS[name][col]
        if nr is None:
            continue
        nxt = f"r{i}"
        prog += [_ins(_LD_ABS, _NR), _ins(_JEQ, nr, 0, nxt)]
        for arg, op, value in conds:
            prog.append(_ins(_LD_ABS, _ARGS + 8 * arg))
            prog.append(_ins(_JSET if op == "set" else _JEQ, value, 0, nxt))
        prog.append(_ins(_RET, _ERRNO | err))
        labels[nxt] = len(prog)
    prog.append(_ins(_RET, _ALLOW))
    labels["deny"] = len(prog)
    prog.append(_ins(_RET, _ERRNO | EPERM))
    out = []
    for i, (code, jt, jf, k) in enumerate(prog):
        t, f = (labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        assert 0 <= t < 256 and 0 <= f < 256
        out.append(struct.pack("<HBBI", code, t, f, k))
    return b"".join(out)
