"""Where a warm start's time goes, step by step, from the kernel's own exec events (root only).

    sudo .venv/bin/python bench/timeline.py [--runs N] [--network proxy|none|host]

A bench world (temp HOME, a private tmux server, the 1 KB stand-in codex) starts the same
isolated session N+1 times (the first fills the caches, not counted). tracefs records every
exec (sched_process_exec) with the kernel's timestamp, with no ptrace and nothing in the
processes' way; the steps are the execs of the start's own process tree and of the pane's:

    tmuxjail (the CLI) -> tmux (new-session's client) -> python (the launcher, in the pane)
    -> bwrap -> prlimit -> the CLI -> ready file

Each step's median is printed, with the bare-bwrap pane's (the dry-run argv run by
`tmux new-session -d`) measured the same way beside it. Timestamps are the kernel's, so
the numbers hold under load better than wall clocks, but an idle machine gives the truth.
Not a test, not part of bench/run.py: a tool for whoever works on the start path."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tjbench.tools import find
from tjbench.world import READY, SMALL_SIZE, Servers, World, make_standin

TRACEFS = Path("/sys/kernel/tracing")
EVENT = re.compile(r"\s(\d+\.\d+): (sched_process_exec|sched_process_fork|tracing_mark_write): (.*)")


class Trace:
    """tracefs exec and fork events around one command."""

    def __init__(self) -> None:
        if not (TRACEFS / "trace").exists():
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, check=False)
        if not (TRACEFS / "trace").exists():
            raise SystemExit("timeline: tracefs is not available (root, and a kernel with ftrace)")
        for ev in ("sched_process_exec", "sched_process_fork"):
            (TRACEFS / "events" / "sched" / ev / "enable").write_text("1")

    def __enter__(self) -> Trace:
        (TRACEFS / "tracing_on").write_text("0")
        (TRACEFS / "trace").write_text("")
        (TRACEFS / "tracing_on").write_text("1")
        (TRACEFS / "trace_marker").write_text("T0")
        return self

    def __exit__(self, *exc: object) -> None:
        (TRACEFS / "tracing_on").write_text("0")

    @staticmethod
    def execs(roots: set[int]) -> list[tuple[float, str]]:
        """(ms since the mark, executable) of every exec in the process trees of `roots`."""
        t0, keep, out = None, set(roots), []
        for line in (TRACEFS / "trace").read_text().splitlines():
            m = EVENT.search(line)
            if not m:
                continue
            t, kind, rest = float(m.group(1)), m.group(2), m.group(3)
            if kind == "tracing_mark_write":
                t0 = t
                continue
            pid = re.search(r"(?:^|\s)pid=(\d+)", rest)
            if t0 is None or pid is None or int(pid.group(1)) not in keep:
                continue
            if kind == "sched_process_fork":
                child = re.search(r"child_pid=(\d+)", rest)
                if child:
                    keep.add(int(child.group(1)))
            elif exe := re.search(r"filename=(\S+)", rest):
                out.append(((t - t0) * 1000, exe.group(1)))
        return out


def steps(execs: list[tuple[float, str]], ready: float) -> dict[str, float]:
    """The times (ms) each step began, named by what was exec'd, in order; repeats numbered."""
    out: dict[str, float] = {}
    for t, exe in execs:
        name = os.path.basename(exe)
        name = "python" if name.startswith("python") else name
        key, i = name, 2
        while key in out:
            key, i = f"{name}#{i}", i + 1
        out[key] = t
    out["ready"] = ready
    return out


def timed(w: World, server: int, argv: list[str], ready: Path) -> dict[str, float]:
    ready.unlink(missing_ok=True)
    with Trace():
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=w.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        while not ready.exists():
            time.sleep(0.0005)
        at = (time.perf_counter() - t0) * 1000
    proc.wait()
    exited = (time.perf_counter() - t0) * 1000
    out = steps(Trace.execs({server, os.getpid()}), at)
    out["command exits"] = exited  # what still shares the CPUs with the CLI's own start
    return out


def report(label: str, runs: list[dict[str, float]]) -> None:
    keys = [k for k in runs[-1] if all(k in r for r in runs)]
    print(f"\n{label} (median of {len(runs)}; ms since the command was spawned):")
    prev = 0.0
    for k in sorted(keys, key=lambda k: statistics.median(r[k] for r in runs)):
        at = statistics.median(r[k] for r in runs)
        print(f"  {k:<14} at {at:7.1f}   (+{at - prev:5.1f})")
        prev = at


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--network", choices=("proxy", "none", "host"), default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("timeline: tracefs needs root", file=sys.stderr)
        return 2
    tools = find()
    servers = Servers(tools.tmux)
    base = Path(tempfile.mkdtemp(prefix="tjtimeline-"))
    try:
        w = World(tools, servers, base, "timeline")
        make_standin(w.bin / "codex", SMALL_SIZE)
        ws_tj, ws_bw = w.workspace("tj"), w.workspace("bwrap")
        w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
        server = int(w.tmux("display-message", "-p", "#{pid}").stdout.strip())
        net = ["--network", a.network] if a.network else []
        bw = w.dry_run_argv(ws_bw)
        tj_runs, bw_runs = [], []
        for i in range(a.runs + 1):
            tj = timed(w, server, w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws_tj), *net,
                                       "--name", f"t{i}", "--detach"), ws_tj / READY)
            w.kill_session(f"t{i}")
            bare = timed(w, server, [tools.tmux, "-L", w.socket, "new-session", "-d", "-s", f"b{i}", "-c", str(ws_bw),
                                     *bw], ws_bw / READY)
            w.kill_session(f"b{i}")
            if i:
                tj_runs.append(tj)
                bw_runs.append(bare)
        report("tmuxjail start --mode isolated --detach (warm)", tj_runs)
        report("bare bwrap in tmux new-session -d", bw_runs)
    finally:
        servers.kill_all()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
