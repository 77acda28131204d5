#!/usr/bin/env python3
"""The workspace's walk: which of tmuxjail's modules a start and a resume pass the workspace
path through, from the command line to bubblewrap's argv, and how often each is entered again
(docs/architecture.md, "The workspace's walk").

    .venv/bin/python -P scripts/walk.py [--json] [--calls]

Runs the installed tmuxjail in this process, under a profile hook, on a private tmux server with
a private HOME and a stand-in CLI (tests/standins), in isolated mode: a first start (the policy
cache misses: the full resolution), a second start (the warm start, from the cache), then the
first session stopped and resumed. A call is on the walk when one of its arguments holds the
workspace's path (a string, or a tuple, list or dict holding it, two levels deep). The walk ends
with the last call into tmuxjail.sandbox.bwrap. "Entries" counts how many times the walk comes
into a module from another one; a module entered more than once is a climb back. Calls into the
base layer's leaves (LEAVES) count as modules used, not as steps.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def holds(value, needle: str, depth: int = 2) -> bool:
    if isinstance(value, str):
        return needle in value
    if depth == 0:
        return False
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "_asdict") and not isinstance(value, type):
        value = list(value._asdict().values())
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        value = list(vars(value).values())
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(holds(v, needle, depth - 1) for v in list(value)[:64])
    return False


def traced(argv: list[str], needle: str) -> list[tuple[str, str]]:
    """(module, function) of each call on the walk, in order."""
    from tmuxjail.cli import run

    pkg = str(Path(sys.modules["tmuxjail"].__file__).parent)
    calls: list[tuple[str, str]] = []

    def hook(frame, event, _arg):
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(pkg):
            return
        args = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames[:args]
        if any(holds(frame.f_locals.get(n), needle) for n in names):
            calls.append((frame.f_globals.get("__name__", "?"), code.co_name))

    sys.setprofile(hook)
    try:
        code = run(argv)
    finally:
        sys.setprofile(None)
    if code:
        raise SystemExit(f"walk: tmuxjail {' '.join(argv)} exited {code}")
    last = max((i for i, (m, _) in enumerate(calls) if m.startswith("tmuxjail.sandbox.bwrap")), default=len(calls) - 1)
    return calls[: last + 1]


# The base layer's leaves, called as one calls a builtin ("is this path inside that root"): a call
# there is counted as a module the walk uses, not as a step away from the module that made it.
LEAVES = ("tmuxjail.subpath", "tmuxjail.errors", "tmuxjail.canon")


def summary(calls: list[tuple[str, str]]) -> dict:
    entries: dict[str, int] = {}
    leaves: set[str] = set()
    walk: list[str] = []
    for module, _ in calls:
        if module in LEAVES:
            leaves.add(module)
        elif not walk or walk[-1] != module:
            walk.append(module)
            entries[module] = entries.get(module, 0) + 1
    return {"modules": len(entries) + len(leaves), "climbs": sum(n - 1 for n in entries.values()),
            "entries": entries, "leaves": sorted(leaves), "walk": walk, "calls": [f"{m}.{f}" for m, f in calls]}


def world() -> tuple[Path, str, list[str]]:
    root = Path(tempfile.mkdtemp(prefix="tj-walk-"))
    home, ws, bin_ = root / "home", root / f"ws-walk-{uuid.uuid4().hex[:8]}", root / "bin"
    for d in (home, ws, bin_):
        d.mkdir()
    shutil.copy(ROOT / "tests" / "standins" / "standin.sh", bin_ / "codex")
    (bin_ / "codex").chmod(0o755)
    os.environ.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": f"{bin_}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "SHELL": "/bin/sh", "PWD": str(ws),
    })
    for k in [k for k in os.environ if k.startswith("TMUX")]:
        del os.environ[k]
    os.chdir(ws)
    return root, str(ws), ["-L", f"tjwalk-{uuid.uuid4().hex[:8]}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the walks as JSON")
    ap.add_argument("--calls", action="store_true", help="also print every call on each walk")
    opts = ap.parse_args()
    root, ws, server = world()
    start = [*server, "start", "codex", "--mode", "isolated", "--network", "none", "--detach", "--non-interactive"]
    try:
        walks = {
            "start (full resolution)": traced([*start, "--name", "walk1"], ws),
            "start (warm)": traced([*start, "--name", "walk2"], ws),
        }
        subprocess.run([sys.executable, "-P", "-m", "tmuxjail", *server, "stop", "walk1"], check=True, capture_output=True)
        walks["resume"] = traced([*server, "resume", "walk1", "--detach"], ws)
    finally:
        subprocess.run(["tmux", *server, "kill-server"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    out = {name: summary(calls) for name, calls in walks.items()}
    if opts.json:
        print(json.dumps(out, indent=2))
        return
    for name, s in out.items():
        print(f"{name}: {s['modules']} modules, {s['climbs']} climbs back")
        print("  " + " -> ".join(m.removeprefix("tmuxjail.") for m in s["walk"]))
        again = {m.removeprefix("tmuxjail."): n for m, n in s["entries"].items() if n > 1}
        if again:
            print("  entered more than once: " + ", ".join(f"{m} {n}x" for m, n in again.items()))
        if opts.calls:
            print("  calls: " + ", ".join(c.removeprefix("tmuxjail.") for c in s["calls"]))


if __name__ == "__main__":
    main()
