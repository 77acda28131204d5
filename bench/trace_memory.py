#!/usr/bin/env python3
"""Peak memory of building discovery's evidence from a trace at its size cap (issue 27): the code
at --rev (default: before the parse was streamed; it held every parsed call) against this
checkout's, side by side, interleaved run by run, each in a child process of its own.

    .venv/bin/python bench/trace_memory.py [--mib 256] [--runs 3] [--rev REV] [--shape repeated|distinct]

The trace is synthetic, shaped like strace -f -xx -y output: bubblewrap's root, the CLI it
executes, then until --mib is reached a mix of opens and stats of paths (`repeated`: 2,000
distinct paths used over and over, what a CLI that reads and polls in a loop writes; `distinct`:
every stat a new name, a flood of distinct paths), forks with their exits, unfinished and resumed
calls; and the cap's marker line. Each child reports ru_maxrss before and after the build (the
growth is the figure) and how long the build took (information only). Prints a table and, with
--json, writes the figures. Nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_REV = "ecc31de"


def hx(s: str) -> str:
    return "".join(f"\\x{c:02x}" for c in s.encode())


def q(s: str) -> str:
    return f'"{hx(s)}"'


def write_trace(path: Path, mib: int, shape: str) -> int:
    """A synthetic trace of about `mib` MiB ending with the cap's marker; its line count."""
    limit, n = mib << 20, 0
    with open(path, "w", encoding="ascii") as f:
        head = [f"100 1.000000 execve({q('/usr/bin/bwrap')}, [{q('bwrap')}], 0x7ff /* 3 vars */) = 0",
                "100 1.000001 clone(child_stack=NULL, flags=CLONE_NEWPID|SIGCHLD) = 101",
                f"101 1.000002 execve({q('/usr/bin/codex')}, [{q('codex')}], 0x1 /* 1 vars */) = 0"]
        f.write("\n".join(head) + "\n")
        size, i, pid = f.tell(), 0, 200
        while size < limit:
            i += 1
            ts = f"{2 + i / 1e6:.6f}"
            if shape == "distinct":
                name = f"/home/u/.cache/flood/d{i % 97}/f{i}"
            else:
                name = f"/home/u/.config/app/d{i % 40}/file{i % 2000}.json"
            block = [f"101 {ts} openat(AT_FDCWD<{hx('/ws')}>, {q(name)}, O_RDONLY|O_CLOEXEC) = 3<{hx(name)}>",
                     f"101 {ts} newfstatat(AT_FDCWD<{hx('/ws')}>, {q('/usr/lib/x' + str(i % 300))}, "
                     "0x7ffd, 0) = -1 ENOENT (No such file or directory)"]
            if i % 50 == 0:
                pid = 200 + (i // 50) % 30000
                block += [f"101 {ts} clone(child_stack=NULL, flags=SIGCHLD <unfinished ...>",
                          f"{pid} {ts} execve({q('/usr/bin/git')}, [{q('git')}], 0x1 /* 1 vars */) = 0",
                          f"101 {ts} <... clone resumed>) = {pid}",
                          f"{pid} {ts} +++ exited with 0 +++"]
            text = "\n".join(block) + "\n"
            f.write(text)
            size += len(text)
            n += len(block)
        f.write(f"tmuxjail-trace-cap {limit}\n")
    return n + 4


CHILD = r"""
import hashlib, json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1]) if sys.argv[1] else None
from tmuxjail.discover import evidence, trace
mode, path = sys.argv[2], sys.argv[3]
if mode == "stream":
    from tmuxjail.commands import discovery as run
meta = {"id": "codex-ws-1", "mode": "isolated", "provider": "codex", "workspaces": ["/ws"], "home": "/home/u",
        "own_dirs": [], "install_roots": [], "started_at": "now",
        "identity": {"path": "/usr/bin/codex", "sha256": "sha256:x"}}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
with open(path, "rb") as f:
    if mode == "held":  # the code before the stream: parse() held every call, then build()
        h = hashlib.sha256()
        def lines():
            for raw in f:
                h.update(raw)
                yield raw.decode("ascii", "replace")
        t = trace.parse(lines())
        ev = evidence.build(meta, t, "sha256:" + h.hexdigest(), lambda p: False, None)
    else:  # what commands/discovery.finish does now
        ev = run.evidence_of(meta, Path(path), None, host_has=lambda p: False)
dt = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
d = ev.dump()
print(json.dumps({"growth_kib": after - before, "peak_kib": after, "seconds": dt, "lines": d["trace"]["lines"],
                  "paths": len(d["paths"]), "denials": len(d["denials"]), "truncated": d["trace"]["truncated"],
                  "cap": d["trace"]["cap"], "sha256": d["trace"]["sha256"],
                  "evidence": hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()}))
"""


def child(src: str, mode: str, trace: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, src, mode, str(trace)], capture_output=True, text=True,
                         cwd=trace.parent)  # the installed package after, never this checkout's source
    if out.returncode:
        raise SystemExit(f"bench: the {mode} child failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rev", default=BASE_REV, help="the baseline: a commit whose parse held every call")
    ap.add_argument("--shape", choices=("repeated", "distinct"), default="repeated")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tj-bench-trace-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", a.rev, "tmuxjail"], capture_output=True,
                              check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=arch, check=True)
        trace = Path(tmp) / "trace"
        lines = write_trace(trace, a.mib, a.shape)
        rows: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(a.runs):
            rows["before"].append(child(str(base), "held", trace))
            rows["after"].append(child("", "stream", trace))
    b = rows["before"][0]
    same = all(r["evidence"] == b["evidence"] for v in rows.values() for r in v)
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("growth_kib", "peak_kib", "seconds")}
           for k, v in rows.items()}
    print(f"trace: {a.mib} MiB, {lines} lines, shape {a.shape}; {a.runs} runs each, interleaved; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'':8} {'RSS growth':>12} {'peak RSS':>10} {'build':>8}")
    for k in ("before", "after"):
        print(f"{k:8} {med[k]['growth_kib'] / 1024:>9.1f} MiB {med[k]['peak_kib'] / 1024:>6.1f} MiB "
              f"{med[k]['seconds']:>6.1f} s")
    print(f"growth ratio after/before: {med['after']['growth_kib'] / max(1, med['before']['growth_kib']):.3f}; "
          f"the same evidence in every run: {same} "
          f"({b['lines']} lines, {b['paths']} paths, {b['denials']} denials, truncated {b['truncated']}, cap {b['cap']})")
    if a.json:
        Path(a.json).write_text(json.dumps({"mib": a.mib, "shape": a.shape, "runs": rows, "median": med,
                                            "same": same}, indent=2) + "\n")


if __name__ == "__main__":
    main()
