"""What the start-time audit snapshot costs (issue 13): one walk of a workspace of ~20,000 files
(200 directories of 100 files, a .git with hooks and a config, a node_modules that is skipped),
in process, median of N runs after one warm-up (the page cache is warm, as right after an
editor or a build touched the tree); also the size of the `audit-base` event it stores.

    .venv/bin/python bench/audit_snapshot.py [--runs N] [--files N]

The snapshot lists and reads only what it needs (no lstat per file: setuid/setgid/hard-link
findings are dated by ctime at audit time instead); the audit's own walk, which does lstat every
file, is printed as information (it runs when the session ends, not on the start path).

Target: snapshot median <= 75 ms for 20,000 files (under a fifth of a start). Prints PASS/MISS;
never fails."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tmuxjail import scan

TARGET_MS = 75.0


def build(root: Path, files: int) -> None:
    per = 100
    for d in range(files // per):
        sub = root / f"src{d // 20}" / f"pkg{d}"
        sub.mkdir(parents=True)
        for i in range(per):
            (sub / f"f{i}.py").write_bytes(b"x = 1\n")
    git = root / ".git"
    (git / "hooks").mkdir(parents=True)
    (git / "objects" / "pack").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tpager = less\n")
    for h in ("pre-commit.sample", "pre-push.sample"):
        (git / "hooks" / h).write_text("#!/bin/sh\n")
    (root / ".envrc").write_text("use nix\n")
    nm = root / "node_modules" / "x"
    nm.mkdir(parents=True)
    for i in range(2000):
        (nm / f"m{i}.js").write_bytes(b"")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--files", type=int, default=20_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tj-bench-audit-") as tmp:
        root = Path(tmp)
        build(root, a.files)
        scan.scan([str(root)])  # warm-up
        times, s = [], None
        for _ in range(a.runs):
            t0 = time.perf_counter()
            s = scan.scan([str(root)], stat_files=False)
            times.append((time.perf_counter() - t0) * 1000)
        stored = json.dumps({"ids": {f["id"]: f["sig"] for f in s.findings}, "entries": s.entries,
                             "capped": s.capped, "ms": 0.0}, sort_keys=True)
        med = statistics.median(times)
        print(f"audit snapshot: {s.entries} entries walked, {len(s.findings)} findings, "
              f"skipped {len(s.skipped)} dir(s); event {len(stored)} bytes")
        print(f"  median {med:.1f} ms  min {min(times):.1f}  max {max(times):.1f}  (N={a.runs}, "
              f"python {sys.version.split()[0]}, uid {os.getuid()})")
        print(f"  target <= {TARGET_MS:.0f} ms: {'PASS' if med <= TARGET_MS else 'MISS'}")
        full = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            scan.scan([str(root)])
            full.append((time.perf_counter() - t0) * 1000)
        print(f"audit walk (lstat of every file; info): median {statistics.median(full):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
