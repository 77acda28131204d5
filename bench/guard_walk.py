"""What the strict start's walks cost with the trust catalogue (issue 26), against the walks of
the release before it, in process, interleaved run by run, page cache warm:

- guards: the start walk that finds every path to bind read-only (host.guards; before:
  host.git_guards, which looked for `.git` only and skipped node_modules, .venv and target);
- snapshot: the audit baseline's walk (scan.scan(stat_files=False); before: the same function
  without the catalogue).

Three trees: this repository's checkout as it is (its .venv included, as a developer's workspace
has one: the old walks skipped it whole, the new ones look into it), the same without untracked
files (a copy of `git ls-files`), and a tree at the start walk's limit (host.MAX_DIRS
directories, one file each).

    .venv/bin/python bench/guard_walk.py [--runs N] [--rev REV] [--root DIR]

Targets (issue 26): on this repository, the new walks <= 1.3x the old and <= 10 ms (guards).
Prints PASS/MISS; never fails."""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tmuxjail import host, scan

REPO = Path(__file__).resolve().parents[1]


def old_module(rev: str, path: str, name: str):
    """The module at `rev`, loaded inside the installed tmuxjail package (its relative imports
    resolve there: gitconfig and sandbox kept the functions these walks use)."""
    src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], check=True, capture_output=True,
                         text=True).stdout
    spec = importlib.util.spec_from_loader(f"tmuxjail.{name}", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "tmuxjail"
    exec(compile(src, path, "exec"), mod.__dict__)
    return mod


def limit_tree(root: Path) -> None:
    per = 100
    for d in range(host.MAX_DIRS - 10):
        sub = root / f"d{d // per}" / f"e{d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / "f.py").write_bytes(b"")


def timed(fn, runs: int) -> list[float]:
    return [fn() for _ in range(runs)]


def clock(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def compare(label: str, root: str, old_host, old_scan, runs: int) -> list[tuple[str, float, float]]:
    pairs = {
        "guards": (lambda: old_host.git_guards([root]), lambda: host.guards([root])),
        "snapshot": (lambda: old_scan.scan([root], stat_files=False), lambda: scan.scan([root], stat_files=False)),
    }
    rows = []
    for what, (old, new) in pairs.items():
        old(), new()  # warm-up
        o, n = [], []
        for _ in range(runs):
            o.append(clock(old))
            n.append(clock(new))
        rows.append((f"{label}: {what}", statistics.median(o), statistics.median(n)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rev", default="4f80faf")
    ap.add_argument("--root", default=str(REPO))
    a = ap.parse_args()
    old_host = old_module(a.rev, "tmuxjail/host.py", "_bench_old_host")
    old_scan = old_module(a.rev, "tmuxjail/scan.py", "_bench_old_scan")
    rows = compare("this repository", a.root, old_host, old_scan, a.runs)
    with tempfile.TemporaryDirectory(prefix="tj-bench-walk-") as tmp:
        files = subprocess.run(["git", "-C", a.root, "ls-files", "-z"], check=True, capture_output=True).stdout
        for rel in filter(None, files.decode().split("\0")):
            dst = Path(tmp) / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(b"")
        (Path(tmp) / ".git").mkdir()
        rows += compare("tracked files only", tmp, old_host, old_scan, a.runs)
    with tempfile.TemporaryDirectory(prefix="tj-bench-walk-") as tmp:
        limit_tree(Path(tmp))
        rows += compare(f"{host.MAX_DIRS - 10} directories", tmp, old_host, old_scan, max(3, a.runs // 4))
    print(f"walks with the trust catalogue vs {a.rev} (median of N, ms; python {sys.version.split()[0]}, "
          f"uid {os.getuid()}, load {os.getloadavg()[0]:.1f})")
    for name, o, n in rows:
        print(f"  {name:40s} before {o:8.2f}  after {n:8.2f}  {n / o:5.2f}x")
    for g in rows[:4]:
        ok = g[2] <= 1.3 * g[1] and g[2] <= 10
        print(f"  target ({g[0]}) <= 1.3x and <= 10 ms: {'PASS' if ok else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
