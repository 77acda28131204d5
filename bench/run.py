#!/usr/bin/env python3
"""Side-by-side benchmarks for tmuxjail (issue 8).

    python bench/run.py [--quick] [--json FILE] [--runs N] [--real-500] [--only PART]

Every measurement runs next to its baseline in the same process and the same run, interleaved
run by run, on private tmux servers (-L bench-<random>) that are killed at the end. HOME and the
XDG directories point into a temporary directory, so the user's own tmuxjail state, config and
tmux server are never touched. Targets are printed as PASS/MISS next to each ratio; a MISS never
fails the process (exit 0): these are measurements, not tests, and nothing here is collected by
pytest. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import re
import secrets
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MB = 1 << 20
POLL = 0.002  # seconds between looks at a ready file
READY = ".ready"
BIG_SIZE = 400 * MB
SMALL_SIZE = 1024
N_FILES = 20_000
N_REPO_FILES = 10_000

# -- where things are ------------------------------------------------------------------------


def _tmuxjail_exe() -> Path:
    for cand in (Path(sys.executable).parent / "tmuxjail", REPO / ".venv" / "bin" / "tmuxjail"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    hit = shutil.which("tmuxjail")
    if hit:
        return Path(hit)
    sys.exit("bench: cannot find the tmuxjail console script (activate the venv: /work/main/.venv)")


TJ = _tmuxjail_exe()


def _interpreter_of(script: Path) -> str:
    with open(script, "rb") as f:
        first = f.readline().decode().strip()
    if first.startswith("#!"):
        parts = first[2:].split()
        if parts and Path(parts[0]).name != "env":
            return parts[0]
    return sys.executable


TJ_PY = _interpreter_of(TJ)  # "the same interpreter" for the `python -c pass` baseline
BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
TMUX = shutil.which("tmux") or "tmux"
WORK_PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else None
GIT = shutil.which("git")

# -- bookkeeping -----------------------------------------------------------------------------

SOCKETS: list[str] = []


def kill_servers() -> None:
    """Kill our private servers, and remove the socket files tmux 3.3 leaves behind."""
    sockdir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")
    for sock in SOCKETS:
        subprocess.run([TMUX, "-L", sock, "kill-server"], capture_output=True)
        path = sockdir / sock
        if path.is_socket() and subprocess.run([TMUX, "-L", sock, "list-sessions"],
                                               capture_output=True).returncode != 0:
            path.unlink(missing_ok=True)
    SOCKETS.clear()


def log(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


def stats(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0, "runs": []}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs),
            "runs": [round(x, 6) for x in xs]}


@dataclass
class Row:
    """One measurement and the baselines it is compared with."""
    section: str
    name: str
    unit: str  # "s" (printed in ms), "MB", "MB/s", "count"
    data: dict
    baselines: list = field(default_factory=list)  # dicts: name, data | skipped, target, note
    note: str = ""


ROWS: list[Row] = []


def add(section, name, unit, xs, note="") -> Row:
    row = Row(section, name, unit, stats(xs) if isinstance(xs, list) else xs, note=note)
    ROWS.append(row)
    return row


def compare(row: Row, name: str, xs=None, *, target: float | None = None, skipped: str | None = None,
            note: str = "") -> None:
    b: dict = {"name": name, "note": note}
    if skipped is not None:
        b["skipped"] = skipped
    else:
        b["data"] = stats(xs) if isinstance(xs, list) else xs
        m, bm = row.data.get("median"), b["data"].get("median")
        b["ratio"] = (m / bm) if (m is not None and bm) else None
        if target is not None:
            b["target"] = target
            b["verdict"] = None if b["ratio"] is None else ("PASS" if b["ratio"] <= target else "MISS")
    row.baselines.append(b)


def absolute_target(row: Row, limit: float, label: str) -> None:
    m = row.data.get("max")
    row.baselines.append({"name": label, "absolute": limit, "note": "max over runs",
                          "verdict": None if m is None else ("PASS" if m <= limit else "MISS")})


# -- a private tmuxjail world ----------------------------------------------------------------


class World:
    """A temporary HOME + XDG dirs + a private tmux server socket name."""

    def __init__(self, base: Path, label: str):
        self.root = base / label
        self.home = self.root / "home"
        self.bin = self.root / "bin"
        for d in (self.home, self.bin):
            d.mkdir(parents=True)
        self.socket = f"bench-{secrets.token_hex(4)}"
        SOCKETS.append(self.socket)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            PATH=f"{self.bin}:{env.get('PATH', os.defpath)}",
            LC_ALL="C.UTF-8",
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env = env

    def env_with_bin(self, bindir: Path) -> dict:
        env = dict(self.env)
        env["PATH"] = f"{bindir}:{self.env['PATH']}"
        return env

    def tj(self, *args: str) -> list[str]:
        return [str(TJ), "-L", self.socket, *args]

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([TMUX, "-L", self.socket, *args], env=self.env, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {p.stderr.strip()}")
        return p

    def store_path(self) -> Path:
        return self.home / ".local" / "state" / "tmuxjail" / "store.db"

    def workspace(self, name: str) -> Path:
        ws = self.root / "ws" / name
        ws.mkdir(parents=True, exist_ok=True)
        return ws

    def dry_run(self, ws: Path, env: dict | None = None) -> dict:
        p = subprocess.run(self.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                   "--dry-run", "--json"), env=env or self.env, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"tmuxjail start --dry-run failed: {p.stderr.strip()}")
        return json.loads(p.stdout)

    def dry_run_argv(self, ws: Path, env: dict | None = None) -> list[str]:
        """The bwrap argv tmuxjail would run for this workspace (the launcher adds only its
        --seccomp and --json-status-fd fds). A dry run creates nothing: make the private home
        the argv binds, as a real start would."""
        d = self.dry_run(ws, env)
        home = d["policy"].get("private_home")
        if home:
            Path(home, ".codex").mkdir(parents=True, exist_ok=True, mode=0o700)
        return d["sandbox_argv"]

    def kill_session(self, name: str) -> None:
        self.tmux("kill-session", "-t", f"={name}", check=False)

    def pane_pid(self, name: str) -> int | None:
        p = self.tmux("display-message", "-p", "-t", f"={name}:", "#{pane_pid}", check=False)
        return int(p.stdout.strip()) if p.stdout.strip().isdigit() else None


def make_standin(path: Path, size: int) -> Path:
    """A stand-in provider CLI: writes the ready file into its cwd (the workspace), then sleeps.
    Padded to `size` bytes after the exec line (sparse past the first KB); sh never reads that far."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = f"#!/bin/sh\n: > {READY}\nexec sleep 3600\n".encode()
    with open(path, "wb") as f:
        f.write(head)
        f.write(b"\0" * (min(size, SMALL_SIZE) - len(head)))
    if size > SMALL_SIZE:
        os.truncate(path, size)
    path.chmod(0o755)
    return path


# -- timing primitives -----------------------------------------------------------------------


@dataclass
class Timed:
    ready: float | None  # seconds from invocation until the ready file existed
    exited: float  # seconds until the invoked command exited
    maxrss_kb: int
    rc: int
    stderr: str


def time_until_ready(argv: list[str], env: dict, ready: Path, cwd: Path | None = None,
                     timeout: float = 30.0) -> Timed:
    """Run argv; time until `ready` exists and until argv exits; peak RSS of argv's process tree
    (wait4 rusage of this child alone: ru_maxrss in KB)."""
    with contextlib.suppress(FileNotFoundError):
        ready.unlink()
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
        t_ready = t_exit = None
        status, ru = None, None
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            if t_exit is None:
                pid, st, r = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    t_exit, status, ru = time.perf_counter() - t0, st, r
                    proc.returncode = os.waitstatus_to_exitcode(st)
                    if proc.returncode != 0:
                        break
            if t_ready is None and os.path.exists(ready):
                t_ready = time.perf_counter() - t0
            if t_ready is not None and t_exit is not None:
                break
            time.sleep(POLL)
        if t_exit is None:  # timed out: do not leave it behind
            proc.kill()
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            t_exit = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode(errors="replace")
    return Timed(t_ready, t_exit, ru.ru_maxrss if ru else 0, proc.returncode, text)


def time_cmd(argv: list[str], env: dict, cwd: Path | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv[:4])} … exited {p.returncode}: {p.stderr.strip()[-400:]}")
    return dt, p.stdout


def time_any(argv: list[str], env: dict) -> float:
    """Wall time of argv, whatever its exit status."""
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    return time.perf_counter() - t0


def vmrss_kb(pid: int | None) -> tuple[int | None, str]:
    if not pid:
        return None, "?"
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None, "?"
    name = re.search(r"^Name:\s*(\S+)", text, re.MULTILINE)
    rss = re.search(r"^VmRSS:\s*(\d+)", text, re.MULTILINE)
    return (int(rss.group(1)) if rss else None), (name.group(1) if name else "?")


def find_srt() -> list[str] | None:
    """The peer launcher, only if already installed (never fetched from the network here)."""
    hit = shutil.which("srt")
    if hit:
        return [hit]
    roots = []
    try:
        npm_root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, timeout=20).stdout.strip()
        if npm_root:
            roots.append(Path(npm_root))
    except (OSError, subprocess.SubprocessError):
        pass
    roots.append(REPO / "node_modules")
    for root in roots:
        pkg = root / "@anthropic-ai" / "sandbox-runtime"
        if (pkg / "package.json").is_file():
            bin_ = root / ".bin" / "srt"
            if bin_.exists():  # by path: npx would look for it from the pane's cwd, not here
                return [str(bin_)]
    return None


# -- 1. start --------------------------------------------------------------------------------


def bench_start(base: Path, n: int) -> dict:
    w = World(base, "start")
    standin = make_standin(w.bin / "codex", SMALL_SIZE)
    ws_tj, ws_bw, ws_tm, ws_srt = (w.workspace(x) for x in ("tj", "bwrap", "tmux", "srt"))
    # Start the server first with a keeper session, so no side pays for starting tmux itself.
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
    bw_argv = w.dry_run_argv(ws_bw)
    dash_i = bw_argv.index("--")
    log(f"bare bwrap argv: {len(bw_argv)} words, command {shlex.join(bw_argv[dash_i + 1:])}")
    srt = find_srt()
    # The peer's equivalent of our isolated workspace: writes only there, no network.
    srt_settings = ws_srt.parent / "srt-settings.json"
    srt_settings.write_text(json.dumps({"filesystem": {"denyRead": [], "allowWrite": [str(ws_srt)], "denyWrite": []},
                                        "network": {"allowedDomains": [], "deniedDomains": []}}))

    def tj_start(i: int) -> Timed:
        t = time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws_tj),
                                  "--name", f"tj{i}", "--detach"), w.env, ws_tj / READY)
        if t.rc != 0 or t.ready is None:
            raise RuntimeError(f"tmuxjail start failed (rc {t.rc}): {t.stderr.strip()[-500:]}")
        return t

    def tmux_start(name: str, ws: Path, argv: list[str]) -> Timed:
        t = time_until_ready([TMUX, "-L", w.socket, "new-session", "-d", "-s", name, "-c", str(ws), *argv],
                             w.env, ws / READY)
        if t.rc != 0 or t.ready is None:
            raise RuntimeError(f"tmux new-session {name} failed (rc {t.rc}): {t.stderr.strip()[-300:]}")
        return t

    # warm-up (not counted): the first start also fills the identity cache and the page cache
    tj_start(0)
    w.kill_session("tj0")
    tmux_start("bw0", ws_bw, bw_argv)
    w.kill_session("bw0")

    tj_ready, tj_exit, tj_rss, tj_pane_rss = [], [], [], []
    bw_ready, bw_pane_rss, tm_ready, srt_ready = [], [], [], []
    srt_error = None
    pane_names = set()
    for i in range(1, n + 1):
        t = tj_start(i)
        tj_ready.append(t.ready)
        tj_exit.append(t.exited)
        tj_rss.append(t.maxrss_kb / 1024)
        rss, name = vmrss_kb(w.pane_pid(f"tj{i}"))
        pane_names.add(name)
        tj_pane_rss.append(rss / 1024 if rss else None)
        w.kill_session(f"tj{i}")

        t = tmux_start(f"bw{i}", ws_bw, bw_argv)
        bw_ready.append(t.ready)
        rss, _ = vmrss_kb(w.pane_pid(f"bw{i}"))
        bw_pane_rss.append(rss / 1024 if rss else None)
        w.kill_session(f"bw{i}")

        t = tmux_start(f"tm{i}", ws_tm, ["/bin/sh", str(standin)])
        tm_ready.append(t.ready)
        w.kill_session(f"tm{i}")

        if srt and srt_error is None:
            try:
                t = tmux_start(f"srt{i}", ws_srt, [*srt, "-s", str(srt_settings), "/bin/sh", str(standin)])
                srt_ready.append(t.ready)
            except RuntimeError as exc:
                srt_error = str(exc)
            w.kill_session(f"srt{i}")

    row = add("start", "tmuxjail start --mode isolated --detach → ready", "s", tj_ready,
              note="invocation until the stand-in inside the pane wrote its ready file")
    compare(row, "bare bwrap in tmux new-session -d (dry-run argv)", bw_ready, target=4.0)
    compare(row, "stand-in in tmux new-session -d, no sandbox (info)", tm_ready)
    if srt is None:
        compare(row, "srt in tmux new-session -d (peer launcher)", skipped="skipped: not installed")
    elif srt_error or not srt_ready:
        compare(row, "srt in tmux new-session -d (peer launcher)", skipped=f"skipped: failed: {srt_error}"[:200])
    else:
        compare(row, "srt in tmux new-session -d (peer launcher)", srt_ready, target=1.0)
    add("start", "tmuxjail start → command exited (info)", "s", tj_exit,
        note="the CLI waits for bwrap's child-pid status before returning")

    # Where the time goes (info): the resolution alone (no tmux, no launch), and the in-pane
    # launcher's own interpreter start-up.
    dry, launcher = [], []
    for _ in range(n):
        dry.append(time_cmd(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws_tj),
                                 "--dry-run", "--json"), w.env)[0])
        launcher.append(time_any([TJ_PY, "-E", "-m", "tmuxjail.launch"], w.env))
    add("start", "breakdown: tmuxjail start --dry-run (resolve only; info)", "s", dry)
    add("start", "breakdown: launcher start-up, python -E -m tmuxjail.launch (info)", "s", launcher)
    IMPORTS["tmuxjail start --dry-run"] = _importtime(
        [str(TJ), "-L", w.socket, "start", "codex", "--mode", "isolated", "--workspace", str(ws_tj), "--dry-run"],
        w.env)

    mem = add("memory", "peak RSS of `tmuxjail start` (wait4 ru_maxrss)", "MB", tj_rss)
    absolute_target(mem, 60.0, "target ≤ 60 MB")
    left = add("memory", f"RSS the launcher leaves: VmRSS of pane pid ({'/'.join(sorted(pane_names))})", "MB",
               tj_pane_rss, note="after the launcher exec'd bwrap")
    compare(left, "VmRSS of the bare bwrap pane pid", bw_pane_rss)
    w.tmux("kill-server", check=False)
    return {"bwrap_argv": bw_argv, "srt": srt}


# -- 1b. the in-pane launcher, to its exec of bwrap (issue 18.3) --------------------------------

LAUNCH_STUB = ("import sys, os; sys.path[:0] = [{root!r}]; os.execve = lambda *a: os._exit(0); "
               "from tmuxjail.launch import main; main(sys.argv[1:])")


def bench_launcher(base: Path, n: int) -> None:
    """The launcher's whole path up to exec'ing bwrap, on a real spec: the pane command
    (python -I -S -c STUB --fp FP SPEC) with only os.execve replaced by an exit. A spec and a
    store row are made from `start --dry-run`, as a real start makes them."""
    import sqlite3

    w = World(base, "launcher")
    make_standin(w.bin / "codex", SMALL_SIZE)
    ws = w.workspace("l")
    d = w.dry_run(ws)
    pol = d["policy"]
    if pol.get("private_home"):
        Path(pol["private_home"], ".codex").mkdir(parents=True, exist_ok=True, mode=0o700)
    store = w.root / "store.db"
    db = sqlite3.connect(store)
    db.execute("CREATE TABLE sessions (id TEXT, fingerprint TEXT, status TEXT)")
    db.execute("INSERT INTO sessions VALUES ('bench', ?, 'starting')", (d["fingerprint"],))
    db.commit()
    db.close()
    spec_path = w.root / "spool" / "bench.json"
    spec_path.parent.mkdir(mode=0o700)
    landlock = subprocess.run([TJ_PY, "-c", "from tmuxjail.sandbox import landlock as l; print(l.abi() >= l.MIN_ABI)"],
                              capture_output=True, text=True).stdout.strip() == "True"
    spec = json.dumps({
        "session_id": "bench", "fingerprint": d["fingerprint"], "policy": pol, "argv": d["sandbox_argv"],
        "env": dict(pol["env_set"]), "store": str(store), "status_file": str(spec_path.with_suffix(".status")),
        "machine": platform.machine(), "sandboxed": True, "layout": d["host_layout"], "landlock_scope": landlock})
    root = subprocess.run([TJ_PY, "-c", "import os, tmuxjail; print(os.path.dirname(os.path.dirname(tmuxjail.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    launcher = [TJ_PY, "-I", "-S", "-c", LAUNCH_STUB.format(root=root), "--fp", d["fingerprint"], str(spec_path)]
    baseline = [TJ_PY, "-I", "-S", "-c", "pass"]

    def run_launcher(extra: tuple[str, ...] = ()) -> float:
        fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, spec.encode())
        os.close(fd)
        argv = [launcher[0], *extra, *launcher[1:]]
        t0 = time.perf_counter()
        p = subprocess.run(argv, env={"PATH": "/usr/bin:/bin", "TERM": "xterm"}, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"launcher exited {p.returncode}: {p.stderr.strip()[-300:]}")
        return dt

    run_launcher()  # warm-up
    time_any(baseline, w.env)
    lt, bt = [], []
    for _ in range(3 * n):  # cheap: three times the runs, interleaved
        lt.append(run_launcher())
        bt.append(time_any(baseline, w.env))
    row = add("launcher", "launcher → exec bwrap (python -I -S -c STUB, real spec, isolated)", "s", lt,
              note="reads and deletes the spec, checks fingerprint, store and argv, keyring, "
                   + ("pids cgroup, " if os.getuid() == 0 else "") + "Landlock, seccomp, binds by fd")
    compare(row, f"{TJ_PY} -I -S -c pass", bt, target=2.0)
    fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, spec.encode())
    os.close(fd)
    p = subprocess.run([TJ_PY, "-X", "importtime", *launcher[1:]], env={"PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True)
    entries = [m.groups() for m in re.finditer(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", p.stderr)]
    IMPORTS["the launcher, to exec"] = sorted(
        ({"module": mod, "self_us": int(s_), "cumulative_us": int(c), "depth": len(ind) // 2}
         for s_, c, ind, mod in entries if not ind), key=lambda e: -e["cumulative_us"])[:6]
    if os.getuid() == 0:  # the pids cgroups of the launchers that ran (empty now), v2 or v1
        for g in [*Path("/sys/fs/cgroup/tmuxjail").glob("bench-*"), *Path("/sys/fs/cgroup/pids/tmuxjail").glob("bench-*")]:
            try:
                g.rmdir()
            except OSError:
                pass


# -- 1c. failing starts answer at once (issue 18.6) --------------------------------------------


def bench_failure(base: Path, n: int) -> None:
    """tmuxjail start when the tmux server is killed right after it creates the session, and
    when the jail cannot come up (a hook replaces the pane's launcher with a command that fails
    the way bwrap does), next to a start that succeeds: each answers with its reason."""
    w = World(base, "failure")
    make_standin(w.bin / "codex", SMALL_SIZE)
    ws = w.workspace("f")
    cases = {
        "tmux server killed during start": ("kill-server", "tmux server exited"),
        "jail cannot come up (launcher replaced by a failing command)":
            ("respawn-pane -k \"sh -c 'echo bwrap: cannot come up >&2; exit 1'\"", "bwrap: cannot come up"),
    }

    def start(i: int, hook: str | None) -> tuple[float, str]:
        w.tmux("kill-server", check=False)
        for _ in range(50):  # the previous server may still be on its way out
            if w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400", check=False).returncode == 0:
                break
            time.sleep(0.1)
        if hook:
            w.tmux("set-hook", "-g", "session-created", hook)
        t0 = time.perf_counter()
        p = subprocess.run(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws), "--name", f"f{i}-{len(hook or '')}",
                                "--detach"), env=w.env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        return time.perf_counter() - t0, (p.stderr.strip().splitlines() or [""])[0] if p.returncode else ""

    start(0, None)  # warm-up: identity cache, page cache
    times: dict[str, list[float]] = {k: [] for k in cases}
    ok = []
    for i in range(1, n + 1):
        t, err = start(i, None)
        if err:
            raise RuntimeError(f"the successful start failed: {err}")
        ok.append(t)
        for name, (hook, reason) in cases.items():
            t, err = start(i, hook)
            if reason not in err:
                raise RuntimeError(f"{name}: expected {reason!r} in the error, got {err!r}")
            times[name].append(t)
    for name, xs in times.items():
        row = add("failure", f"start → error: {name}", "s", xs, note=f"the error names it: {cases[name][1]!r}")
        absolute_target(row, 1.0, "target ≤ 1 s")
        compare(row, "a start that succeeds (info)", ok)
    w.tmux("kill-server", check=False)


# -- 2. identity cache: 400 MB vs 1 KB ---------------------------------------------------------


def bench_identity(base: Path, n: int) -> None:
    w = World(base, "identity")
    big = make_standin(w.root / "bin-400m" / "codex", BIG_SIZE)
    small = make_standin(w.root / "bin-1k" / "codex", SMALL_SIZE)
    env_big, env_small = w.env_with_bin(big.parent), w.env_with_bin(small.parent)
    ws = w.workspace("id")
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
    count = [0]

    def start(env: dict) -> Timed:
        count[0] += 1
        name = f"id{count[0]}"
        t = time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                  "--name", name, "--detach"), env, ws / READY)
        w.kill_session(name)
        if t.rc != 0 or t.ready is None:
            raise RuntimeError(f"tmuxjail start failed (rc {t.rc}): {t.stderr.strip()[-500:]}")
        return t

    # In-process hash throughput of identity.sha256_file, no cache (what a cold start pays).
    sys.path.insert(0, str(REPO))
    from tmuxjail.identity import sha256_file

    hash_s = []
    for _ in range(2 if n < 5 else 3):
        t0 = time.perf_counter()
        sha256_file(big, None)
        hash_s.append(time.perf_counter() - t0)

    start(env_small)  # warm-up: interpreter, page cache, and the 1 KB stand-in's digest
    cold = []
    for _ in range(max(2, n // 3)):
        os.utime(big)  # new mtime and ctime: the stat key changes, the cache must miss
        cold.append(start(env_big).ready)
    warm_big, warm_small = [], []
    for _ in range(n):
        warm_big.append(start(env_big).ready)
        warm_small.append(start(env_small).ready)

    row = add("identity", "warm start, 400 MB executable", "s", warm_big)
    compare(row, "warm start, 1 KB executable", warm_small, target=1.1)
    crow = add("identity", "cold start, 400 MB executable (touched: re-hash)", "s", cold,
               note=f"first cold start: {cold[0] * 1000:.0f} ms")
    compare(crow, "warm start, 400 MB executable", warm_big)
    cold_first = cold[0]
    extra = cold_first - statistics.median(warm_big)
    tput = [BIG_SIZE / MB / s for s in hash_s]
    add("identity", "hash throughput, sha256_file in-process, no cache", "MB/s", tput)
    add("identity", "hash throughput implied by 1st cold start (info)", "MB/s",
        [BIG_SIZE / MB / extra] if extra > 0 else [], note=f"(first cold − median warm) = {extra * 1000:.0f} ms for 400 MB")
    w.tmux("kill-server", check=False)


# -- 3. list ---------------------------------------------------------------------------------


def _fast_sessions(w: World, count: int, start_index: int) -> None:
    """`count` more sessions the cheap way: copies of a real row inserted with tmuxjail.store.Store,
    each with a tmux session running `sleep` whose start command carries the launcher marker, so
    `list` classifies and joins them exactly as it does real jails."""
    sys.path.insert(0, str(REPO))
    from tmuxjail.store import Store

    store = Store(w.store_path())
    template = store.sessions()[0]
    fp = template.fingerprint
    batch: list[str] = []
    for k in range(start_index, start_index + count):
        name = f"f{k}"
        store.insert_session(
            name=name, provider=template.provider, mode=template.mode, env_name=template.env_name,
            workspace=template.workspace, fingerprint=fp, policy=template.policy, request=template.request,
            status="running", native_id=template.native_id, private_home=template.private_home,
            tmux_socket=template.tmux_socket, tmux_session=name,
        )
        batch += ["new-session", "-d", "-s", name, "/bin/sh", "-c", "exec sleep 86400",
                  "tmuxjail.launch", "--fp", fp, ";",
                  "set-option", "-t", f"={name}:", "@tmuxjail_id", name, ";",
                  "set-option", "-t", f"={name}:", "@tmuxjail_fp", fp, ";"]
        if len(batch) > 400:  # tmux refuses messages over ~16 KB
            w.tmux(*batch[:-1])
            batch = []
    if batch:
        w.tmux(*batch[:-1])
    store.close()


def bench_list(base: Path, n: int, real_500: bool) -> None:
    w = World(base, "list")
    make_standin(w.bin / "codex", SMALL_SIZE)
    have = 0

    def grow(to: int, real: bool) -> None:
        nonlocal have
        if real:
            for k in range(have, to):
                ws = w.workspace(f"l{k}")
                t = time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                          "--name", f"l{k}", "--detach"), w.env, ws / READY)
                if t.rc != 0 or t.ready is None:
                    raise RuntimeError(f"tmuxjail start l{k} failed: {t.stderr.strip()[-400:]}")
        else:
            _fast_sessions(w, to - have, have)
        have = to

    def measure(label: str, how: str) -> None:
        ls_t, ver_t = [], []
        rounds = max(n, 5)
        _, out = time_cmd(w.tj("list", "--json"), w.env)  # warm-up, and a sanity check
        rows = json.loads(out)
        running = sum(1 for r in rows if r.get("status") == "running")
        panes_t = []
        fmt_ = "\x1f".join(f"#{{{f}}}" for f in ("session_name", "window_id", "pane_id", "pane_pid", "pane_dead",
                                                 "pane_dead_status", "pane_current_command", "@tmuxjail_id",
                                                 "@tmuxjail_fp", "pane_start_command"))
        for _ in range(rounds):
            ls_t.append(time_cmd(w.tj("list", "--json"), w.env)[0])
            ver_t.append(time_cmd([str(TJ), "--version"], w.env)[0])
            panes_t.append(time_cmd([TMUX, "-L", w.socket, "list-panes", "-a", "-F", fmt_], w.env)[0])
        row = add("list", f"tmuxjail list --json, {label} session{'s' if label != '1' else ''}"
                  f"{' (fast path)' if 'fast' in how else ''}", "s", ls_t,
                  note=f"{how}; list returned {len(rows)} rows, {running} running")
        compare(row, "tmuxjail --version", ver_t, target=1.5 if label == "500" else None)
        compare(row, "the one tmux list-panes -a call list makes (info)", panes_t)

    log("list: 1 real session")
    grow(1, True)
    measure("1", "real starts")
    log("list: 50 real sessions")
    grow(50, True)
    measure("50", "real starts")
    if real_500:
        log("list: 500 real sessions (slow)")
        grow(500, True)
        measure("500", "real starts")
    else:
        log("list: 500 sessions (50 real + 450 inserted via Store, tmux panes running sleep)")
        grow(500, False)
        measure("500", "fast path: 50 real + 450 Store rows with tmux sessions running sleep")
    w.tmux("kill-server", check=False)


# -- 4. CLI start-up ---------------------------------------------------------------------------


def _importtime(argv: list[str], env: dict, top: int = 5) -> list[dict]:
    p = subprocess.run([TJ_PY, "-X", "importtime", *argv], env=env, capture_output=True, text=True)
    entries = []
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)", line)
        if m:
            entries.append({"module": m.group(4), "self_us": int(m.group(1)), "cumulative_us": int(m.group(2)),
                            "depth": len(m.group(3)) // 2})
    toplevel = sorted((e for e in entries if e["depth"] == 0), key=lambda e: -e["cumulative_us"])
    return toplevel[:top]


IMPORTS: dict[str, list[dict]] = {}


def bench_cli(base: Path, n: int) -> None:
    w = World(base, "cli")  # empty store, no tmux server on this socket
    rounds = 3 * n
    ver, lst, py = [], [], []
    for argv in ([str(TJ), "--version"], w.tj("list"), [TJ_PY, "-c", "pass"]):
        time_cmd(argv, w.env)  # warm-up
    for _ in range(rounds):
        ver.append(time_cmd([str(TJ), "--version"], w.env)[0])
        lst.append(time_cmd(w.tj("list"), w.env)[0])
        py.append(time_cmd([TJ_PY, "-c", "pass"], w.env)[0])
    r = add("cli", "tmuxjail --version", "s", ver)
    compare(r, f"{TJ_PY} -c pass", py, target=2.5)
    r = add("cli", "tmuxjail list (empty store)", "s", lst)
    compare(r, f"{TJ_PY} -c pass", py)
    IMPORTS["tmuxjail list"] = _importtime([str(TJ), "-L", w.socket, "list"], w.env)
    IMPORTS["tmuxjail --version"] = _importtime([str(TJ), "--version"], w.env)


# -- 5. work inside the jail -------------------------------------------------------------------

WORKLOAD = r'''
import json, os, subprocess, sys, time
what, where = sys.argv[1], sys.argv[2]
if what == "files":
    n = int(sys.argv[3])
    d = os.path.join(where, "files-%d" % os.getpid())
    t0 = time.perf_counter()
    os.mkdir(d)
    names = [os.path.join(d, "f%05d" % i) for i in range(n)]
    for p in names:
        with open(p, "wb") as f:
            f.write(b"x")
    for p in names:
        os.stat(p)
    for p in names:
        os.unlink(p)
    os.rmdir(d)
    dt = time.perf_counter() - t0
elif what == "git":
    t0 = time.perf_counter()
    subprocess.run(["git", "-C", where, "status"], check=True, stdout=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
print(json.dumps({"inner": dt}))
'''


def bench_work(base: Path, n: int, quick: bool = False) -> None:
    if not WORK_PY or not GIT:
        add("work", "work inside the jail", "s", [], note="skipped: /usr/bin/python3 or git missing")
        return
    w = World(base, "work")
    make_standin(w.bin / "codex", SMALL_SIZE)
    ws = w.workspace("work")
    script = ws / "_workload.py"
    script.write_text(WORKLOAD)
    repo = ws / "repo"
    log(f"work: creating a git repo of {N_REPO_FILES} files")
    for i in range(N_REPO_FILES):
        d = repo / f"d{i // 100:03d}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n")
    genv = dict(w.env, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
                GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run([GIT, "-C", str(repo), *args], env=genv, check=True, capture_output=True)

    argv = w.dry_run_argv(ws)
    prefix = argv[: argv.index("--") + 1]
    cases = {
        "files": (["files", str(ws), str(N_FILES)],
                  f"create+stat+delete {N_FILES:,} files in workspace"),
        "git": (["git", str(repo)], f"git status, repo of {N_REPO_FILES:,} files"),
    }
    for key, (args, label) in cases.items():
        cmd = [WORK_PY, str(script), *args]
        inside_inner, outside_inner, inside_wall, outside_wall = [], [], [], []
        if key == "git":  # warm-up both sides: the first status refreshes the index
            time_cmd(prefix + cmd, w.env, cwd=ws)
            time_cmd(cmd, w.env, cwd=ws)
        # 20,000 creates take seconds (and vary a lot on a busy disk): fewer rounds with --quick,
        # and no new pair once the time budget is spent (always at least one pair)
        rounds = min(n, 2) if (quick and key == "files") else n
        budget = time.perf_counter() + (15 if quick else 180)
        for i in range(rounds):
            if i and time.perf_counter() > budget:
                log(f"work/{key}: time budget spent after {i} pairs")
                break
            dt, out = time_cmd(prefix + cmd, w.env, cwd=ws)
            inside_wall.append(dt)
            inside_inner.append(json.loads(out)["inner"])
            dt, out = time_cmd(cmd, w.env, cwd=ws)
            outside_wall.append(dt)
            outside_inner.append(json.loads(out)["inner"])
        row = add("work", f"{label}: inside jail", "s", inside_inner,
                  note="timed inside the workload (bwrap argv from --dry-run, workload as command); "
                       "the wall-clock row adds bwrap set-up and python start-up")
        compare(row, "same, outside", outside_inner, target=1.05)
        row = add("work", f"{label}: inside, wall clock (info)", "s", inside_wall)
        compare(row, "same, outside", outside_wall)


# -- output ----------------------------------------------------------------------------------


def fmt(v, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1000:.1f} ms" if v < 10 else f"{v:.2f} s"
    if unit == "MB":
        return f"{v:.1f} MB"
    if unit == "MB/s":
        return f"{v:.0f} MB/s"
    return f"{v:g}"


def table() -> str:
    head = ["measurement", "median", "min", "max", "vs baseline", "baseline median", "ratio", "target", "result"]
    lines: list[list[str]] = []
    section = None
    for r in ROWS:
        if r.section != section:
            section = r.section
            lines.append([f"[{section}]"] + [""] * (len(head) - 1))
        d = r.data
        first = [r.name, fmt(d.get("median"), r.unit), fmt(d.get("min"), r.unit), fmt(d.get("max"), r.unit)]
        if d.get("n", 0) == 0 and r.note:
            first[1] = r.note
        if not r.baselines:
            lines.append(first + ["", "", "", "", ""])
        for i, b in enumerate(r.baselines):
            lead = first if i == 0 else ["", "", "", ""]
            if "skipped" in b:
                lines.append(lead + [b["name"], b["skipped"], "", "", ""])
            elif "absolute" in b:
                lines.append(lead + ["(absolute)", "", "", f"≤ {b['absolute']:g} {r.unit}", b["verdict"] or "-"])
            else:
                ratio = b.get("ratio")
                lines.append(lead + [b["name"], fmt(b["data"].get("median"), r.unit),
                                     f"{ratio:.2f}×" if ratio is not None else "-",
                                     f"≤ {b['target']:g}×" if "target" in b else "",
                                     b.get("verdict") or ("" if "target" not in b else "-")])
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head))]
    widths[0] = min(widths[0], 70)
    widths[4] = min(widths[4], 62)

    def render(row):
        cells = []
        for i, (c, wd) in enumerate(zip(row, widths, strict=True)):
            if len(c) > wd:
                c = c[: wd - 1] + "…"
            cells.append(c.rjust(wd) if i in (1, 2, 3, 5, 6) else c.ljust(wd))
        return "  ".join(cells).rstrip()

    out = [render(head), render(["-" * w for w in widths])]
    out += [render(row) for row in lines]
    return "\n".join(out)


def notes() -> str:
    out = []
    for r in ROWS:
        if r.note:
            out.append(f"- {r.name}: {r.note}")
    for what, top in IMPORTS.items():
        out.append(f"- top {len(top)} imports of `{what}` (-X importtime, top-level, cumulative): " +
                   ", ".join(f"{e['module']} {e['cumulative_us'] / 1000:.1f} ms" for e in top))
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few runs (N=3), about a minute")
    ap.add_argument("--runs", type=int, help="runs per measurement (default 3 with --quick, else 10)")
    ap.add_argument("--json", metavar="FILE", default=str(Path(__file__).parent / "results.json"),
                    help="where to write the JSON results (default: bench/results.json)")
    ap.add_argument("--real-500", action="store_true", help="start all 500 list sessions for real (slow)")
    ap.add_argument("--only", action="append", choices=["start", "launcher", "failure", "identity", "list", "cli", "work"],
                    help="run only this part (repeatable)")
    args = ap.parse_args()
    n = args.runs or (3 if args.quick else 10)

    for tool in (TMUX, BWRAP):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is not installed")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    base = Path(tempfile.mkdtemp(prefix="tjbench-"))
    started = time.perf_counter()
    parts = args.only or ["start", "launcher", "failure", "identity", "list", "cli", "work"]
    errors = {}
    meta = {}
    try:
        for part in parts:
            log(f"{part} (N={n})")
            try:
                if part == "start":
                    meta.update(bench_start(base, n))
                elif part == "launcher":
                    bench_launcher(base, n)
                elif part == "failure":
                    bench_failure(base, n)
                elif part == "identity":
                    bench_identity(base, n)
                elif part == "list":
                    bench_list(base, n, args.real_500)
                elif part == "cli":
                    bench_cli(base, n)
                elif part == "work":
                    bench_work(base, n, args.quick)
            except Exception as exc:  # noqa: BLE001 - report, keep going: one broken part must not hide the others
                errors[part] = f"{exc.__class__.__name__}: {exc}"
                log(f"{part} failed: {errors[part]}")
    finally:
        kill_servers()
        shutil.rmtree(base, ignore_errors=True)
    elapsed = time.perf_counter() - started

    date = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    ver = subprocess.run([str(TJ), "--version"], capture_output=True, text=True).stdout.strip()
    tmux_v = subprocess.run([TMUX, "-V"], capture_output=True, text=True).stdout.strip()
    bwrap_v = subprocess.run([BWRAP, "--version"], capture_output=True, text=True).stdout.strip()
    header = (f"tmuxjail bench — {date} — {ver}, {tmux_v}, {bwrap_v}, Python {platform.python_version()} "
              f"({TJ_PY}), {platform.machine()}, {os.cpu_count()} CPUs, uid {os.getuid()}; "
              f"N={n}{' (--quick)' if args.quick else ''}; took {elapsed:.0f} s")
    print(header)
    print(table())
    text = notes()
    if text:
        print("\nnotes:\n" + text)
    misses = [f"{r.name} vs {b['name']}" for r in ROWS for b in r.baselines if b.get("verdict") == "MISS"]
    print(f"\ntargets missed: {len(misses)}" + "".join(f"\n  - {m}" for m in misses))
    for part, err in errors.items():
        print(f"ERROR in {part}: {err}")

    result = {
        "date": date, "header": header, "quick": args.quick, "runs": n, "elapsed_s": elapsed,
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "uid": os.getuid(),
                 "python": TJ_PY, "tmuxjail": ver, "tmux": tmux_v, "bwrap": bwrap_v},
        "results": [{"section": r.section, "name": r.name, "unit": r.unit, "note": r.note, **r.data,
                     "baselines": r.baselines} for r in ROWS],
        "imports": IMPORTS, "misses": misses, "errors": errors,
        "bwrap_baseline_argv": meta.get("bwrap_argv"), "srt": meta.get("srt"),
    }
    Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"\nJSON written to {args.json}")
    return 0  # a MISS is a measurement, never a failure


if __name__ == "__main__":
    sys.exit(main())
