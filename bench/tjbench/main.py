"""The bench command: parse, run the parts (one broken part never hides the others), print the
table and write the JSON. Exits 0 on a MISS: these are measurements, not tests."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .parts import PARTS, Bench, log
from .results import notes, table
from .targets import evaluate, markdown
from .targets import text as targets_text
from .tools import BenchError, Tools, find
from .world import Servers

USAGE = """Side-by-side benchmarks for tmuxjail (issue 8).

    python bench/run.py [--quick] [--json FILE] [--runs N] [--real-500] [--only PART]

Every measurement runs next to its baseline in the same process and the same run, interleaved
run by run, on private tmux servers (-L bench-<random>) that are killed at the end. HOME and the
XDG directories point into a temporary directory, so the user's own tmuxjail state, config and
tmux server are never touched. Targets are printed as PASS/MISS next to each ratio; a MISS never
fails the process (exit 0): these are measurements, not tests, and nothing here is collected by
pytest. See bench/README.md."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few runs (N=3), about a minute")
    ap.add_argument("--runs", type=int, help="runs per measurement (default 3 with --quick, else 10)")
    ap.add_argument("--json", metavar="FILE", default=str(Path(__file__).resolve().parents[1] / "results.json"),
                    help="where to write the JSON results (default: bench/results.json)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the issue-18 targets and the header as markdown")
    ap.add_argument("--real-500", action="store_true", help="start all 500 list sessions for real (slow)")
    ap.add_argument("--only", action="append", choices=list(PARTS), help="run only this part (repeatable)")
    return ap


def run_parts(b: Bench, parts: list[str]) -> dict[str, str]:
    """Every part in turn; the error of a part that failed, by part."""
    errors = {}
    try:
        for part in parts:
            log(f"{part} (N={b.n})")
            t0 = time.perf_counter()
            try:
                PARTS[part](b)
            except Exception as exc:  # noqa: BLE001 - report, keep going: one broken part must not hide the others
                errors[part] = f"{exc.__class__.__name__}: {exc}"
                log(f"{part} failed: {errors[part]}")
            b.meta.setdefault("part_seconds", {})[part] = round(time.perf_counter() - t0, 1)
            log(f"{part} took {b.meta['part_seconds'][part]:.0f} s")
    finally:
        b.servers.kill_all()
        shutil.rmtree(b.base, ignore_errors=True)
    return errors


def _version(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip()


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def report(b: Bench, tools: Tools, errors: dict[str, str], elapsed: float, json_path: str,
           markdown_path: str | None = None) -> None:
    date = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    ver, tmux_v, bwrap_v = (_version([str(tools.tj), "--version"]), _version([tools.tmux, "-V"]),
                            _version([tools.bwrap, "--version"]))
    header = (f"tmuxjail bench — {date} — {ver}, {tmux_v}, {bwrap_v}, Python {platform.python_version()} "
              f"({tools.tj_py}), {platform.machine()}, {os.cpu_count()} CPUs, uid {os.getuid()}; "
              f"N={b.n}{' (--quick)' if b.quick else ''}; took {elapsed:.0f} s; load average (1/5/15 min) "
              f"{b.meta.get('load_before', '?')} before, {_load()} after")
    print(header)
    print(table(b.results))
    text = notes(b.results)
    if text:
        print("\nnotes:\n" + text)
    targets = evaluate(b.results)
    print("\nissue 18 targets (medians; a MISS never fails the run):\n" + targets_text(targets))
    misses = b.results.misses()
    print(f"\ntargets missed: {len(misses)}" + "".join(f"\n  - {m}" for m in misses))
    for part, err in errors.items():
        print(f"ERROR in {part}: {err}")
    result: dict[str, Any] = {
        "date": date, "header": header, "quick": b.quick, "runs": b.n, "elapsed_s": elapsed,
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "uid": os.getuid(),
                 "python": tools.tj_py, "tmuxjail": ver, "tmux": tmux_v, "bwrap": bwrap_v},
        "results": b.results.as_json(), "imports": b.results.imports, "misses": misses, "errors": errors,
        "targets18": targets, "load_before": b.meta.get("load_before"), "load_after": _load(),
        "part_seconds": b.meta.get("part_seconds"), "bwrap_baseline_argv": b.meta.get("bwrap_argv"), "srt": b.meta.get("srt"),
    }
    Path(json_path).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"\nJSON written to {json_path}")
    if markdown_path:
        Path(markdown_path).write_text(f"{header}\n\n{markdown(targets)}\n")
        print(f"markdown written to {markdown_path}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        tools = find()
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    b = Bench(tools=tools, servers=Servers(tools.tmux), base=Path(tempfile.mkdtemp(prefix="tjbench-")),
              n=args.runs or (3 if args.quick else 10), quick=args.quick, real_500=args.real_500)
    b.meta["load_before"] = _load()
    started = time.perf_counter()
    errors = run_parts(b, args.only or list(PARTS))
    report(b, tools, errors, time.perf_counter() - started, args.json, args.markdown)
    return 0  # a MISS is a measurement, never a failure
