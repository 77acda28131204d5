#!/usr/bin/env python3
"""What libtmux costs tmuxjail (issue 17): its import, and `--version`, `list --json` at 500
sessions and `start`, this tree against the release before libtmux became the tmux layer, side by
side in the same run, interleaved run by run.

    .venv/bin/python bench/libtmux_cost.py [--runs N] [--baseline-rev REV] [--baseline-venv DIR]
    .venv/bin/python bench/libtmux_cost.py --lean [--runs N]

--lean (issue 30.6): what keeping libtmux off the start path buys, this tree only. Three ways to
run a start's tmux commands, interleaved run by run in fresh interpreters: none (tmuxjail's
`ClientCmd`, no libtmux: what the tree does), lean (libtmux's `common` module without the
package's `__init__`: the sys.modules load the tree had before) and full (`import libtmux`, the
plain import). Each is timed as `-X importtime` of what it adds to `import tmuxjail.tmux` plus
one tmux command, and as the wall and CPU time of a warm `tmuxjail start ... --detach` until the
stand-in CLI is ready (the variant's import made first in the same process).

The baseline is built from git (`git archive REV`, default: the parent of the commit that made
libtmux a runtime dependency) into a venv of its own under --baseline-venv (default: a directory
in /tmp, reused when it exists). Both sides read the same store and the same private tmux server
(-L bench-<random>, killed at the end) under a temporary HOME; the default server and the user's
state are never touched. Prints a table; nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TMUX = shutil.which("tmux") or "tmux"
READY = ".ready"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def default_baseline_rev() -> str:
    first = git("log", "--format=%H", "-S", '"libtmux>=0.62,<0.63"', "--", "pyproject.toml").splitlines()
    if not first:
        sys.exit("bench: no commit makes libtmux a runtime dependency; pass --baseline-rev")
    return git("rev-parse", f"{first[-1]}^")


def baseline_venv(rev: str, where: Path) -> Path:
    exe = where / "bin" / "tmuxjail"
    if exe.exists() and (where / "REV").read_text().strip() == rev:
        return exe
    shutil.rmtree(where, ignore_errors=True)
    src = where / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    subprocess.run([str(where / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(src)],
                   check=True, cwd=where)
    (where / "REV").write_text(rev + "\n")
    return exe


class World:
    def __init__(self, root: Path):
        self.root = root
        home = root / "home"
        self.bin = root / "bin"
        for d in (home, self.bin):
            d.mkdir(parents=True)
        self.socket = f"bench-{secrets.token_hex(4)}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_STATE_HOME=str(home / ".local/state"),
                   XDG_DATA_HOME=str(home / ".local/share"), XDG_CACHE_HOME=str(home / ".cache"),
                   PATH=f"{self.bin}:{env.get('PATH', os.defpath)}", LC_ALL="C.UTF-8")
        self.env = env
        standin = self.bin / "codex"
        standin.write_text(f"#!/bin/sh\n: > {READY}\nexec sleep 3600\n")
        standin.chmod(0o755)

    def tmux(self, *args: str) -> None:
        subprocess.run([TMUX, "-L", self.socket, *args], env=self.env, capture_output=True, check=True)

    def kill(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], env=self.env, capture_output=True)
        Path(f"/tmp/tmux-{os.getuid()}", self.socket).unlink(missing_ok=True)


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(argv: list[str], env: dict, cwd: Path | None = None) -> tuple[float, float]:
    """Wall time and CPU time (user + system, of the process and the children it waited for)."""
    c0, t0 = cpu(), time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    dt, dc = time.perf_counter() - t0, cpu() - c0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return dt, dc


def until_ready(argv: list[str], env: dict, ready: Path) -> tuple[float, float]:
    """Wall time until the CLI in the pane wrote its ready file; CPU time of the tmuxjail process."""
    ready.unlink(missing_ok=True)
    c0, t0 = cpu(), time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while not ready.exists():
        if proc.poll() not in (None, 0):
            raise RuntimeError(f"start: exit {proc.returncode}: {proc.stderr.read().strip()[-300:]}")
        if time.perf_counter() - t0 > 30:
            proc.kill()
            raise RuntimeError("start: not ready within 30 s")
        time.sleep(0.002)
    dt = time.perf_counter() - t0
    proc.wait()
    return dt, cpu() - c0


def fast_sessions(w: World, python: str, count: int) -> None:
    """Copies of the one real row (inserted with the baseline's own Store), each with a tmux session
    whose start command carries the launcher marker, so `list` joins them as real jails."""
    code = f"""
import sys
from pathlib import Path
from tmuxjail.store import Store
store = Store(Path(sys.argv[1])); t = store.sessions()[0]
for k in range({count}):
    store.insert_session(name=f"f{{k}}", provider=t.provider, mode=t.mode, env_name=t.env_name,
        workspace=t.workspace, fingerprint=t.fingerprint, policy=t.policy, request=t.request, status="running",
        native_id=t.native_id, private_home=t.private_home, tmux_socket=t.tmux_socket, tmux_session=f"f{{k}}")
print(t.fingerprint)
"""
    store = Path(w.env["XDG_STATE_HOME"]) / "tmuxjail" / "store.db"
    proc = subprocess.run([python, "-I", "-c", code, str(store)], env=w.env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"inserting sessions: {proc.stderr.strip()[-400:]}")
    fp = proc.stdout.strip()
    batch: list[str] = []
    for k in range(count):
        batch += ["new-session", "-d", "-s", f"f{k}", "/bin/sh", "-c", "exec sleep 86400", "tmuxjail.pane.launch",
                  "--fp", fp, ";", "set-option", "-t", f"=f{k}:", "@tmuxjail_id", f"f{k}", ";",
                  "set-option", "-t", f"=f{k}:", "@tmuxjail_fp", fp, ";"]
        if len(batch) > 400:
            w.tmux(*batch[:-1])
            batch = []
    if batch:
        w.tmux(*batch[:-1])


LEAN = {
    "none": "",
    "lean": ("import importlib.util, sys\n"
             "spec = importlib.util.find_spec('libtmux')\n"
             "sys.modules['libtmux'] = importlib.util.module_from_spec(spec)\n"
             "import libtmux.common, libtmux.exc\n"),
    "full": "import libtmux\n",
}
START = "import sys\nfrom tmuxjail.cli import main\nsys.argv[0] = 'tmuxjail'\nsys.exit(main())\n"


def import_us(py: str, pre: str, env: dict) -> tuple[int, float]:
    """-X importtime: microseconds of imports the variant adds after tmuxjail.tmux, and the
    interpreter's whole wall time."""
    code = ("import tmuxjail.tmux as T\nimport sys\nsys.stderr.write('--MARK--\\n')\n" + pre +
            "T.Tmux(socket_name='bench-none').version()\n")
    t0 = time.perf_counter()
    err = subprocess.run([py, "-P", "-X", "importtime", "-c", code], env=env, capture_output=True, text=True,
                         check=True).stderr
    wall = time.perf_counter() - t0
    after = err.partition("--MARK--\n")[2].splitlines()
    # top-level imports only (one space of indent after the second |): their cumulative times
    return sum(int(line.split("|")[1]) for line in after
               if line.startswith("import time:") and line.split("|")[2].startswith(" ") and
               not line.split("|")[2].startswith("  ")), wall


def lean(runs: int) -> int:
    py = sys.executable
    base = Path(tempfile.mkdtemp(prefix="tmuxjail-bench-lean-"))
    w = World(base / "w")
    imp: dict[str, list[float]] = {k: [] for k in LEAN}
    walls: dict[str, list[float]] = {k: [] for k in LEAN}
    starts: dict[str, list[float]] = {k: [] for k in LEAN}
    cpus: dict[str, list[float]] = {k: [] for k in LEAN}
    try:
        for _ in range(runs):
            for k, pre in LEAN.items():
                us, wall = import_us(py, pre, w.env)
                imp[k].append(us / 1e6)
                walls[k].append(wall)
        w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
        ws = base / "ws"
        ws.mkdir()
        for i in range(runs + 1):
            for j, (k, pre) in enumerate(LEAN.items()):
                got = until_ready([py, "-P", "-c", pre + START, "-L", w.socket, "start", "codex", "--mode", "isolated",
                                   "--workspace", str(ws), "--name", f"s{j}-{i}", "--detach"], w.env, ws / READY)
                if i:  # the first round warms the identity cache and the page cache
                    starts[k].append(got[0])
                    cpus[k].append(got[1])
                w.tmux("kill-session", "-t", f"=s{j}-{i}")
    finally:
        w.kill()
        shutil.rmtree(base, ignore_errors=True)
    print(f"tmuxjail libtmux on the start path — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; N={runs}; "
          f"load average {os.getloadavg()[0]:.1f}; {py}")
    print("none: ClientCmd, no libtmux | lean: libtmux.common without __init__ | full: import libtmux")
    print(f"{'measurement':52}  " + "  ".join(f"{k:38}" for k in LEAN))
    for what, by in (("-X importtime, added after tmuxjail.tmux", imp),
                     ("interpreter: import tmuxjail.tmux + 1 tmux cmd, wall", walls),
                     ("warm start codex --mode isolated → ready, wall", starts),
                     ("warm start → ready, CPU of the CLI", cpus)):
        print(f"{what:52}  " + "  ".join(f"{med(by[k]):38}" for k in LEAN))
    return 0


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:7.1f} ms (min {min(xs) * 1000:6.1f}, max {max(xs) * 1000:6.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--baseline-rev")
    ap.add_argument("--baseline-venv", type=Path)
    ap.add_argument("--lean", action="store_true", help="what keeping libtmux off the start path buys (issue 30.6)")
    a = ap.parse_args()
    if a.lean:
        return lean(a.runs)
    new = Path(sys.executable).parent / "tmuxjail"
    if not new.exists():
        sys.exit(f"bench: no tmuxjail next to {sys.executable}; run with the venv's python")
    rev = a.baseline_rev or default_baseline_rev()
    old = baseline_venv(rev, a.baseline_venv or Path(tempfile.gettempdir()) / f"tmuxjail-bench-baseline-{rev[:10]}")
    sides = {"before (no libtmux)": str(old), "after (libtmux)": str(new)}
    py_new = sys.executable
    rows: dict[str, dict[str, list[float]]] = {}

    def add(what: str, side: str, got: tuple[float, float]) -> None:
        rows.setdefault(what, {}).setdefault(side, []).append(got[0])
        rows.setdefault(what + " [CPU]", {}).setdefault(side, []).append(got[1])

    base = Path(tempfile.mkdtemp(prefix="tmuxjail-bench-libtmux-"))
    w = World(base / "w")
    try:
        env = w.env
        for _ in range(a.runs):  # import cost, same interpreter
            what = "python -c pass | python -c 'import libtmux'"
            add(what, "before (no libtmux)", timed([py_new, "-c", "pass"], env))
            add(what, "after (libtmux)", timed([py_new, "-c", "import libtmux"], env))
        imp = subprocess.run([py_new, "-X", "importtime", "-c", "import libtmux"], env=env, capture_output=True,
                             text=True).stderr.splitlines()
        libtmux_us = next(int(line.split("|")[1]) for line in reversed(imp) if line.rstrip().endswith("| libtmux"))
        for _ in range(a.runs):
            for side, exe in sides.items():
                add("tmuxjail --version", side, timed([exe, "--version"], env))
        # start: one server (a keeper session first: nobody pays for starting tmux), one workspace per side
        w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
        for i in range(a.runs + 1):
            for j, (side, exe) in enumerate(sides.items()):
                ws = base / f"ws-{j}"
                ws.mkdir(exist_ok=True)
                got = until_ready([exe, "-L", w.socket, "start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                  "--name", f"s{j}-{i}", "--detach"], env, ws / READY)
                if i:  # the first round warms the identity cache and the page cache
                    add("tmuxjail start codex --mode isolated --detach → ready", side, got)
                w.tmux("kill-session", "-t", f"=s{j}-{i}")
        w.kill()
        # list at 500: one real start, 499 copies (both sides read the same store and server)
        w2 = World(base / "w2")
        ws = base / "ws-list"
        ws.mkdir()
        until_ready([str(new), "-L", w2.socket, "start", "codex", "--mode", "isolated", "--workspace", str(ws),
                     "--name", "real", "--detach"], w2.env, ws / READY)
        fast_sessions(w2, str(Path(old).parent / "python"), 499)
        for side, exe in sides.items():
            out = subprocess.run([exe, "-L", w2.socket, "list", "--json"], env=w2.env, capture_output=True, text=True)
            listed = json.loads(out.stdout)
            assert len(listed) == 500 and all(r["status"] == "running" for r in listed), (side, len(listed))
        for _ in range(a.runs):
            for side, exe in sides.items():
                add("tmuxjail list --json, 500 sessions", side, timed([exe, "-L", w2.socket, "list", "--json"], w2.env))
        w2.kill()
    finally:
        w.kill()
        shutil.rmtree(base, ignore_errors=True)

    print(f"tmuxjail libtmux cost — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; N={a.runs}; "
          f"baseline {rev[:10]} ({old}); after: {new}")
    print(f"libtmux import, -X importtime cumulative: {libtmux_us / 1000:.1f} ms")
    print("[CPU]: user + system time of the measured process (less sensitive to a busy machine than wall time)")
    print(f"{'measurement':58}  {'before (no libtmux)':38}  {'after (libtmux)':38}  ratio")
    for what, by in rows.items():
        b, f = by["before (no libtmux)"], by["after (libtmux)"]
        print(f"{what:58}  {med(b):38}  {med(f):38}  {statistics.median(f) / statistics.median(b):.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
