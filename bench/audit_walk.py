"""What the audit of a large workspace costs (issue 26, bench): the walk `tmuxjail audit`, `stop`
and the pane-died hook make (lstat of every file), on a workspace of 20,000 directories (200 groups
of 100, one file each, a .git with a config), in process, median of N runs after one warm-up;
and, as information, the flood of issue 27 (300 repositories with 200 KiB `core.fsmonitor`
values): the walk's time and the size of the `audit` event stored for it (bounded at 1 MiB).

    .venv/bin/python bench/audit_walk.py [--runs N] [--dirs N] [--no-flood]

Every audit's walk stops at audit.WALK_SECONDS and then reports itself incomplete (exit 6): the
bound. Prints the figures and PASS/MISS against that bound; never fails."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tmuxjail import audit, scan


def build(root: Path, dirs: int) -> None:
    for d in range(dirs):
        sub = root / f"g{d // 100}" / f"d{d}"
        sub.mkdir(parents=True)
        (sub / "f.txt").write_bytes(b"x\n")
    git = root / ".git"
    (git / "objects").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text("[core]\n\trepositoryformatversion = 0\n")


def flood(root: Path) -> None:
    cfg = "[core]\n\tfsmonitor = " + "a" * (200 << 10) + "\n"
    for i in range(300):
        g = root / f"r{i}" / ".git"
        (g / "objects").mkdir(parents=True)
        (g / "HEAD").write_text("ref: refs/heads/main\n")
        (g / "config").write_text(cfg)


def timed(root: Path, runs: int) -> tuple[list[float], scan.Scan]:
    times, s = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        s = scan.scan([str(root)], deadline=time.monotonic() + audit.WALK_SECONDS)
        times.append(time.perf_counter() - t0)
    assert s is not None
    return times, s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dirs", type=int, default=20_000)
    ap.add_argument("--no-flood", action="store_true")
    a = ap.parse_args()
    print(f"python {sys.version.split()[0]}, uid {os.getuid()}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="tj-bench-audit-") as tmp:
        root = Path(tmp)
        build(root, a.dirs)
        scan.scan([str(root)])  # warm-up
        times, s = timed(root, a.runs)
        med = statistics.median(times)
        print(f"audit walk, {a.dirs} directories: {s.entries} entries, {len(s.findings)} findings; "
              f"median {med * 1000:.0f} ms  min {min(times) * 1000:.0f}  max {max(times) * 1000:.0f} (N={a.runs})")
        print(f"  bound {audit.WALK_SECONDS:.0f} s: {'PASS' if max(times) <= audit.WALK_SECONDS else 'MISS'}")
    if not a.no_flood:
        with tempfile.TemporaryDirectory(prefix="tj-bench-flood-") as tmp:
            root = Path(tmp)
            flood(root)
            times, s = timed(root, 1)
            out = [audit.finding(f, "added") for f in s.findings]
            event = json.dumps(audit.stored(out, []), sort_keys=True)
            print(f"flood (300 repositories, 200 KiB core.fsmonitor): walk {times[0]:.1f} s, "
                  f"{len(out)} findings, stored event {len(event) / 1024:.0f} KiB (bound 1024 KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
