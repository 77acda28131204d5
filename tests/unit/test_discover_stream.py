"""Discovery's evidence is built from the trace file as a stream (issue 27): the same evidence as
from the trace held in memory, with memory that does not grow with the trace's length (a trace
may be as large as its cap, 256 MiB by default)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from tmuxjail.commands import discovery as run
from tmuxjail.discover import evidence, trace


def hx(s: str) -> str:
    return "".join(f"\\x{c:02x}" for c in s.encode())


def q(s: str) -> str:
    return f'"{hx(s)}"'


META = {"id": "codex-ws-1", "mode": "isolated", "provider": "codex", "workspaces": ["/ws"], "home": "/home/u",
        "own_dirs": [], "install_roots": [], "started_at": "now",
        "identity": {"path": "/usr/bin/codex", "sha256": "sha256:x"}}
HEAD = [f"100 1.0 execve({q('/usr/bin/bwrap')}, [{q('bwrap')}], 0x7ff /* 3 vars */) = 0",
        f"100 1.0 mkdir({q('/newroot/home/u/.ssh')}, 0755) = 0",  # bubblewrap's setup: not the CLI's
        "100 1.0 clone(child_stack=NULL, flags=CLONE_NEWPID|SIGCHLD) = 101",
        f"101 1.0 execve({q('/usr/bin/codex')}, [{q('codex')}], 0x1 /* 1 vars */) = 0"]


def block(i: int, distinct: bool) -> list[str]:
    """One round of a busy CLI: the same config read again, a miss, and (distinct) a new name."""
    out = [f"101 2.{i} openat(AT_FDCWD<{hx('/ws')}>, {q('/home/u/.config/app/conf.json')}, O_RDONLY) = 3",
           f"101 2.{i} newfstatat(AT_FDCWD, {q(f'/usr/lib/x{i % 7}')}, 0x7ffd, 0) = -1 ENOENT (No such file)"]
    if distinct:  # new names that succeed, and would-be denials (refused by the jail) in two directories
        out += [f"101 2.{i} openat(AT_FDCWD, {q(f'/home/u/.cache/flood/d{i % 3}/f{i}')}, O_WRONLY|O_CREAT, 0600) = 4",
                f"101 2.{i} openat(AT_FDCWD, {q(f'/home/u/.ssh/k{i % 2}/{i}')}, O_RDONLY) = -1 EACCES (Permission denied)"]
    if i % 7 == 0:  # one path refused, then read: tried and kinds on one entry
        out += [f"101 2.{i} openat(AT_FDCWD, {q('/etc/app.conf')}, O_RDWR) = -1 EROFS (Read-only file system)",
                f"101 2.{i} openat(AT_FDCWD, {q('/etc/app.conf')}, O_RDONLY) = 5"]
    if i % 100 == 0:  # a child whose first call strace prints before its parent's clone returns
        pid = 1000 + i
        out += ["101 2.0 clone(child_stack=NULL, flags=SIGCHLD <unfinished ...>",
                f"{pid} 2.0 execve({q('/usr/bin/git')}, [{q('git')}], 0x1 /* 1 vars */) = 0",
                f"{pid} 2.0 openat(AT_FDCWD, {q('/home/u/.gitconfig')}, O_RDONLY) = -1 ENOENT (No such file)",
                f"101 2.0 <... clone resumed>) = {pid}",
                f"{pid} 2.0 +++ exited with 0 +++"]
    return out


def write(path, rounds: int, distinct: bool, tail: list[str]) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(HEAD) + "\n")
        f.writelines("\n".join(block(i, distinct)) + "\n" for i in range(rounds))
        f.write("\n".join(tail) + "\n")


def test_the_streamed_evidence_is_the_evidence_of_the_whole_trace(tmp_path):
    """Dedup and counts, the fold past MAX_PATHS, stitched calls, rejected lines (an over-long one
    too) and the cap's marker: all as when the whole trace was parsed at once."""
    rounds = evidence.MAX_PATHS + 2000
    tail = ['101 3.0 openat(AT_FDCWD, "/etc/shadow", O_RDONLY) = 3',  # raw: not strace -xx output
            f"101 3.0 openat(AT_FDCWD, {q('/x' * 40000)}, O_RDONLY) = 3",  # longer than any strace line
            "tmuxjail-trace-cap 1048576"]
    path = tmp_path / "trace"
    write(path, rounds, True, tail)
    raw = path.read_bytes()
    held = evidence.build(META, trace.parse(raw.decode("ascii").splitlines(True)),
                          "sha256:" + hashlib.sha256(raw).hexdigest(), lambda p: False, None).dump()
    streamed = run.evidence_of(META, path, None, host_has=lambda p: False).dump()
    assert streamed == held
    conf = next(u for u in streamed["paths"] if u["path"] == "/home/u/.config/app/conf.json")
    assert conf["count"] == rounds and len(conf["lines"]) == evidence.MAX_REFS
    assert streamed["trace"]["truncated"] and streamed["trace"]["cap"] == 1 << 20
    assert streamed["trace"]["rejected"] == 2 and streamed["trace"]["lines"] == raw.count(b"\n")
    assert {c["where"] for c in streamed["collapsed"]} == {"paths", "denials"}
    assert streamed["dropped"] >= 2 * (rounds - evidence.MAX_PATHS)
    app = next(u for u in streamed["denials"] if u["path"] == "/etc/app.conf")
    assert app["kinds"] == ["read"] and app["tried"] == {"write": "EROFS"} and app["hidden"]
    assert all(".ssh" not in u["path"] for u in streamed["paths"])
    assert any(p["execs"] == ["/usr/bin/git"] for p in streamed["processes"])


CHILD = r"""
import resource, sys
from pathlib import Path
from tmuxjail.commands import discovery as run
meta = {"id": "codex-ws-1", "mode": "isolated", "provider": "codex", "workspaces": ["/ws"], "home": "/home/u",
        "own_dirs": [], "install_roots": [], "started_at": "now",
        "identity": {"path": "/usr/bin/codex", "sha256": "sha256:x"}}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ev = run.evidence_of(meta, Path(sys.argv[1]), None, host_has=lambda p: False)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, ev.trace.lines, ev.trace.cap)
"""


def test_building_the_evidence_of_a_64_mib_trace_does_not_take_64_mib(tmp_path):
    """A memory ceiling, not a time: holding the parsed calls took about 4 bytes per byte of trace."""
    path = tmp_path / "trace"
    chunk = "\n".join(line for i in range(1, 2000) for line in block(i, False)) + "\n"
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(HEAD) + "\n")
        while f.tell() < 64 << 20:
            f.write(chunk)
        f.write(f"tmuxjail-trace-cap {64 << 20}\n")
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    grew_kib, lines, cap = (int(x) for x in out.stdout.split())
    assert cap == 64 << 20 and lines > 200_000
    assert grew_kib < 64 << 10, json.dumps({"grew_mib": grew_kib >> 10})
