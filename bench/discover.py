#!/usr/bin/env python3
"""What discovery's tracing costs (issue 16, item 8): the first screen under `tmuxjail discover`
against a normal isolated start, side by side, interleaved run by run, in the same process.

    python bench/discover.py [--runs N] [--provider codex|claude-code|pi --path DIR] [--json FILE]

"First screen" is the moment the CLI inside the jail has started: the stand-in writes a file into
the workspace; a real CLI (--provider, found on --path, e.g. the certify cache's
node_modules/.bin) has drawn something in its pane (polled with capture-pane). The target is a ratio of at most 3.0 (printed PASS/MISS; never fails the
process). Private tmux servers and a temporary HOME; nothing of the user's is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 3.0


def tj() -> list[str]:
    return [sys.executable, "-P", "-m", "tmuxjail"]


def standin(path: Path, cli: str | None) -> None:
    path.write_text("#!/bin/sh\ntouch \"$PWD/.first-screen\"\nexec sleep 3\n")
    path.chmod(0o755)


def drawn(sock: str) -> bool:
    panes = subprocess.run(["tmux", "-L", sock, "list-panes", "-a", "-F", "#{pane_id}"], capture_output=True,
                           text=True).stdout.split()
    return any(subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", p], capture_output=True,
                              text=True).stdout.strip() for p in panes)


def timed(argv: list[str], env: dict, ready: Path | str, cwd: Path) -> float:
    if isinstance(ready, Path):
        ready.unlink(missing_ok=True)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    while not (ready.exists() if isinstance(ready, Path) else drawn(ready)):
        if time.monotonic() - t0 > 120:
            raise SystemExit(f"bench: no first screen from {argv}")
        time.sleep(0.002)
    dt = time.monotonic() - t0
    if not isinstance(ready, Path):
        subprocess.run(["tmux", "-L", ready, "kill-server"], capture_output=True)
    proc.wait(timeout=120)
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--provider", choices=("codex", "claude-code", "pi"), help="a real CLI instead of the stand-in")
    ap.add_argument("--path", help="with --provider: the directory that holds its executable")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    if not shutil.which("strace"):
        raise SystemExit("bench: strace is not installed")
    base = Path(tempfile.mkdtemp(prefix="tj-bench-discover-"))
    sock = f"bench-{secrets.token_hex(4)}"
    home, ws, bindir = base / "home", base / "ws", base / "bin"
    for d in (home, ws, bindir):
        d.mkdir()
    standin(bindir / "codex", None)
    provider = a.provider or "codex"
    path = f"{a.path}:" if a.provider else f"{bindir}:"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local/state"),
           "XDG_DATA_HOME": str(home / ".local/share"), "PATH": f"{path}/usr/local/bin:/usr/bin:/bin",
           "LANG": "C.UTF-8", "TERM": "xterm-256color", "PWD": str(ws)}
    ready: Path | str = sock if a.provider else ws / ".first-screen"
    plain, traced = [], []
    try:
        for i in range(a.runs):
            plain.append(timed([*tj(), "-L", sock, "start", provider, "--mode", "isolated", "--detach",
                                "--name", f"b{i}", "--workspace", str(ws)], env, ready, ws))
            subprocess.run([*tj(), "-L", sock, "stop", f"b{i}"], env=env, cwd=ws, capture_output=True)
            traced.append(timed([*tj(), "-L", sock, "discover", provider, "--non-interactive", "--timeout", "60",
                                 "--workspace", str(ws)], env, ready, ws))
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    p, t = statistics.median(plain), statistics.median(traced)
    ratio = t / p
    out = {"runs": a.runs, "cli": a.provider or "stand-in (sh)", "isolated_start_s": round(p, 3),
           "discover_s": round(t, 3), "ratio": round(ratio, 2), "target": TARGET, "pass": ratio <= TARGET,
           "machine": os.uname().release}
    print(f"first screen: isolated start {p:.3f} s, discover {t:.3f} s (median of {a.runs}): "
          f"ratio {ratio:.2f} (target <= {TARGET}: {'PASS' if ratio <= TARGET else 'MISS'})")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
