"""The trace of a discovery run: a strict parser of what strace wrote. Pure. (The strace argv
the launcher puts in front of bubblewrap, and the trace's size cap, are the pane's: pane/strace.py.)

The trace is a seam (DESIGN §8): every name in it was chosen by the jail. strace runs with -xx, so
every string and every fd decoration is printed as \\xHH escapes and nothing the jail chose can
appear raw in a line: no newline, quote, bracket or `) = 0` of its own. The parser replaces each
escaped string by a placeholder before it looks at the line's structure, and rejects (counts) any
line that is not printable ASCII or does not have the expected shape. A crafted file name is only
ever a decoded path in an event, never a syscall, a pid or a return value.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_LINE = 1 << 16  # a path is at most 4096 bytes: 16 KiB of \xHH; longer lines are not strace's


CAP_MARK = "tmuxjail-trace-cap "  # tracecap.py's last line when the run reached the cap (pane/strace.py)


HEXSTR = re.compile(r'"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?')
DECOR = re.compile(r"<((?:\\x[0-9a-f]{2})+)>(?:\(deleted\))?")  # -y marks an unlinked file (a memfd)
LINE = re.compile(r"(\d{1,10}) {1,10}(\d{1,12}\.\d{1,9}) (.*)")  # strace pads short pids
CALL = re.compile(r"([a-z0-9_]{1,40})\((.*)\) += (-?\d+|\?|0x[0-9a-f]+)(@D\d+)?(?: ([A-Z][A-Z0-9_]+) \([^()]*\))?"
                  r"(?: /\* (\d+) in strace's PID NS \*/)?(?: <unavailable>)?$")
UNFINISHED = " <unfinished ...>"
RESUMED = re.compile(r"<\.\.\. ([a-z0-9_]{1,40}) resumed>(.*)")
EXITED = re.compile(r"\+\+\+ exited with (\d+) \+\+\+")
KILLED = re.compile(r"\+\+\+ killed by (SIG[A-Z0-9]+)(?: \(core dumped\))? \+\+\+")


def _unhex(s: str) -> bytes:
    return bytes.fromhex(s.replace("\\x", ""))


@dataclass(frozen=True)
class Call:
    pid: int
    ts: float
    name: str
    args: tuple[str, ...]  # the skeleton of each argument: strings are @S<n>, decorations @D<n>
    strings: tuple[tuple[bytes, bool], ...]  # (bytes, truncated)
    decors: tuple[bytes, ...]
    ret: str
    ret_decor: bytes | None
    errno: str | None
    child: int | None  # clone/fork: the child's pid outside the jail's PID namespace
    line: int

    def string(self, arg: int) -> tuple[bytes, bool] | None:
        if arg >= len(self.args):
            return None
        m = re.fullmatch(r"@S(\d+)", self.args[arg].strip())
        return self.strings[int(m.group(1))] if m else None

    def decor(self, arg: int) -> bytes | None:
        """The path strace decorated argument `arg` (an fd, or AT_FDCWD: the cwd) with."""
        if arg >= len(self.args):
            return None
        m = re.fullmatch(r"(?:AT_FDCWD|\d+)@D(\d+)", self.args[arg].strip())
        return self.decors[int(m.group(1))] if m else None

    @property
    def ok(self) -> bool:
        return self.errno is None and self.ret != "?" and not self.ret.startswith("-")


@dataclass(frozen=True)
class Exit:
    pid: int
    ts: float
    status: int | None
    signal: str | None
    line: int


@dataclass
class Trace:
    calls: list[Call] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    rejected: int = 0  # lines that did not have strace's shape (counted, never interpreted)
    lines: int = 0
    truncated: bool = False
    cap: int | None = None  # the run reached this cap (bytes) and was stopped there (tracecap.py)
    first_ts: float | None = None
    last_ts: float | None = None


def _tokenize(text: str) -> tuple[str, list[tuple[bytes, bool]], list[bytes]] | None:
    strings: list[tuple[bytes, bool]] = []
    decors: list[bytes] = []

    def s(m: re.Match) -> str:
        strings.append((_unhex(m.group(1)), bool(m.group(2))))
        return f"@S{len(strings) - 1}"

    def d(m: re.Match) -> str:
        decors.append(_unhex(m.group(1)))
        return f"@D{len(decors) - 1}"

    skel = DECOR.sub(d, HEXSTR.sub(s, text))
    if '"' in skel:  # a quote that is not part of an escaped string: not strace -xx output
        return None
    return skel, strings, decors


def split_args(skel: str) -> tuple[str, ...]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in skel:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur or out:
        out.append("".join(cur).strip())
    return tuple(out)


def parse(lines, max_lines: int | None = None) -> Trace:
    """lines: an iterable of text lines (decoded as ASCII with errors replaced). The trace's size
    cap (tracecap.py) bounds a real trace; max_lines only bounds a test's. Holds every call: for
    a trace of any size, stream it with `events` instead (what discovery's evidence does)."""
    t = Trace()
    for ev in events(lines, t, max_lines):
        if isinstance(ev, Call):
            t.calls.append(ev)
        else:
            t.exits.append(ev)
    return t


def events(lines, t: Trace, max_lines: int | None = None, only: frozenset[str] | None = None
           ) -> Iterator[Call | Exit]:
    """The calls and exits of a trace, in order, one at a time: what is held is one line and the
    unfinished call of each process, never the trace. `t` gets the counters (lines, rejected,
    truncated, cap, first and last timestamp); its calls and exits are left empty. only: after the
    first call, the names of the calls worth parsing (the others are skipped, and `t.rejected`
    then undercounts): a cheaper pass when only those are wanted."""
    pending: dict[int, tuple[str, int]] = {}
    first = True
    for n, raw in enumerate(lines, 1):
        if max_lines is not None and n > max_lines:
            t.truncated = True
            break
        t.lines = n
        line = raw.rstrip("\n")
        if line.startswith(CAP_MARK) and line[len(CAP_MARK):].isdigit():  # no strace line starts so
            t.truncated, t.cap = True, int(line[len(CAP_MARK):])
            continue
        if len(line) > MAX_LINE or not line.isascii() or not line.isprintable():
            t.rejected += 1
            continue
        m = LINE.fullmatch(line)
        if not m:
            t.rejected += 1
            continue
        pid, ts, rest = int(m.group(1)), float(m.group(2)), m.group(3)
        t.first_ts = ts if t.first_ts is None else t.first_ts
        t.last_ts = ts
        if rest.endswith(UNFINISHED):
            pending[pid] = (rest[: -len(UNFINISHED)], n)
            continue
        r = RESUMED.fullmatch(rest)
        if r:
            head = pending.pop(pid, None)
            if head is None or not head[0].startswith(r.group(1) + "("):
                t.rejected += 1
                continue
            rest, n_at = head[0] + r.group(2), head[1]
        else:
            n_at = n
        if rest.startswith("+++"):
            e, k = EXITED.fullmatch(rest), KILLED.fullmatch(rest)
            if e or k:
                yield Exit(pid, ts, int(e.group(1)) if e else None, k.group(1) if k else None, n)
            else:
                t.rejected += 1
            continue
        if rest.startswith("---"):
            continue  # a signal delivery: not evidence of access
        if only is not None and not first and rest[:rest.find("(")] not in only:
            continue
        call = _call(pid, ts, rest, n_at)
        if call is None:
            t.rejected += 1
        else:
            first = False
            yield call


def _call(pid: int, ts: float, rest: str, n: int) -> Call | None:
    tok = _tokenize(rest)
    if tok is None:
        return None
    skel, strings, decors = tok
    m = CALL.fullmatch(skel)
    if not m:
        return None
    rd = m.group(4)
    return Call(pid=pid, ts=ts, name=m.group(1), args=split_args(m.group(2)), strings=tuple(strings),
                decors=tuple(decors), ret=m.group(3), ret_decor=decors[int(rd[2:])] if rd else None,
                errno=m.group(5), child=int(m.group(6)) if m.group(6) else None, line=n)


# -- from calls to accesses ---------------------------------------------------------------------

# name -> (index of the dirfd argument or None, index of the path argument, kind)
PATH_CALLS: dict[str, tuple[int | None, int, str]] = {
    "open": (None, 0, "open"), "openat": (0, 1, "open"), "openat2": (0, 1, "open"), "creat": (None, 0, "create"),
    "stat": (None, 0, "probe"), "lstat": (None, 0, "probe"), "newfstatat": (0, 1, "probe"),
    "fstatat64": (0, 1, "probe"), "statx": (0, 1, "probe"), "access": (None, 0, "probe"),
    "faccessat": (0, 1, "probe"), "faccessat2": (0, 1, "probe"), "readlink": (None, 0, "probe"),
    "readlinkat": (0, 1, "probe"), "statfs": (None, 0, "probe"), "getxattr": (None, 0, "probe"),
    "lgetxattr": (None, 0, "probe"), "listxattr": (None, 0, "probe"), "llistxattr": (None, 0, "probe"),
    "execve": (None, 0, "exec"), "execveat": (0, 1, "exec"),
    "mkdir": (None, 0, "mkdir"), "mkdirat": (0, 1, "mkdir"), "mknod": (None, 0, "create"),
    "mknodat": (0, 1, "create"),
    "unlink": (None, 0, "delete"), "unlinkat": (0, 1, "delete"), "rmdir": (None, 0, "delete"),
    "truncate": (None, 0, "write"), "chmod": (None, 0, "write"), "fchmodat": (0, 1, "write"),
    "fchmodat2": (0, 1, "write"), "chown": (None, 0, "write"), "lchown": (None, 0, "write"),
    "fchownat": (0, 1, "write"), "utimes": (None, 0, "write"), "utimensat": (0, 1, "write"),
    "futimesat": (0, 1, "write"), "utime": (None, 0, "write"),
    "setxattr": (None, 0, "write"), "lsetxattr": (None, 0, "write"), "removexattr": (None, 0, "write"),
    "symlink": (None, 1, "create"), "symlinkat": (1, 2, "create"),
    "link": (None, 1, "create"), "linkat": (2, 3, "create"),
    "chdir": (None, 0, "probe"),
}
RENAMES = {"rename": (None, 0, None, 1), "renameat": (0, 1, 2, 3), "renameat2": (0, 1, 2, 3)}
FORKS = ("clone", "clone3", "fork", "vfork")


@dataclass(frozen=True)
class Access:
    path: str  # decoded, absolute when it could be resolved
    kind: str  # read, write, create, delete, rename-from, rename-to, mkdir, exec, probe
    ok: bool
    errno: str | None
    pid: int
    line: int
    odd: bool  # not valid UTF-8, control characters, truncated, or relative to an unknown dir


def decode_path(raw: bytes) -> tuple[str, bool]:
    """(printable text, odd): anything that is not plain printable UTF-8 is escaped and flagged,
    so a name never reaches a terminal or a TOML file as raw bytes."""
    text = raw.decode("utf-8", "backslashreplace")
    odd = text != raw.decode("utf-8", "ignore") or not text.isprintable()
    if not text.isprintable():
        text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
    return text, odd


def resolve(base: bytes | None, raw: bytes, truncated: bool) -> tuple[str, bool]:
    text, odd = decode_path(raw)
    odd = odd or truncated
    if text.startswith("/"):
        return posixpath.normpath(text).replace("//", "/"), odd
    if base is None:
        return "?/" + text, True
    btext, bodd = decode_path(base)
    if not btext.startswith("/"):
        return btext + "/" + text, True
    return posixpath.normpath(posixpath.join(btext, text)), odd or bodd


def _open_kind(call: Call) -> str:
    flags = " ".join(call.args[1:])
    if "O_PATH" in flags:
        return "probe"
    if "O_CREAT" in flags or "O_TMPFILE" in flags:
        return "create"
    if "O_WRONLY" in flags or "O_RDWR" in flags or "O_TRUNC" in flags:
        return "write"
    return "read"


def accesses(call: Call, cwd: bytes | None = None) -> list[Access]:
    """The path accesses one call made (none for calls on an fd alone, like fstat(3, "")). cwd:
    the process's working directory as tracked from chdir (for calls without a dirfd)."""
    out: list[Access] = []

    def add(dirfd: int | None, at: int, kind: str) -> None:
        s = call.string(at)
        if s is None or s[0] == b"":  # AT_EMPTY_PATH: the fd itself
            return
        base = call.decor(dirfd) if dirfd is not None else cwd
        path, odd = resolve(base, s[0], s[1])
        out.append(Access(path, kind, call.ok, call.errno, call.pid, call.line, odd))

    if call.name in RENAMES:
        fd1, p1, fd2, p2 = RENAMES[call.name]
        add(fd1, p1, "rename-from")
        add(fd2, p2, "rename-to")
        return out
    spec = PATH_CALLS.get(call.name)
    if spec is None:
        return out
    dirfd, at, kind = spec
    if kind == "open":
        kind = _open_kind(call)
    add(dirfd, at, kind)
    return out


def connect_dest(call: Call) -> str | None:
    """host:port of a connect() to an IP address (names were resolved inside the jail, so a
    trace sees only addresses); a unix socket's path; None for anything else."""
    if call.name != "connect" or len(call.args) < 2:
        return None
    sa = call.args[1]
    port = re.search(r"sin6?_port=htons\((\d+)\)", sa)
    addr = re.search(r"(?:inet_addr|inet_pton)\((?:AF_INET6, )?@S(\d+)", sa)
    if "AF_INET" in sa and port and addr:
        host = call.strings[int(addr.group(1))][0].decode("ascii", "replace")
        if not re.fullmatch(r"[0-9a-fA-F:.]{1,64}", host):
            return None
        return f"[{host}]:{port.group(1)}" if ":" in host else f"{host}:{port.group(1)}"
    unix = re.search(r"sun_path=@S(\d+)", sa)
    if "AF_UNIX" in sa and unix:
        return "unix:" + decode_path(call.strings[int(unix.group(1))][0])[0]
    return None
