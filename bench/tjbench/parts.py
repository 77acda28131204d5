"""The parts of a bench run, one function each: it measures next to its baselines (interleaved run
by run) and adds its rows to the run's results."""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .firstscreen import firstscreen
from .mcp import mcp_broker
from .results import Results
from .targets import warm_path
from .timing import Timed, find_srt, importtime, time_any, time_cmd, time_until_ready, vmrss_kb
from .tools import REPO, Tools
from .world import READY, SMALL_SIZE, Servers, World, make_standin

MB = 1 << 20
BIG_SIZE = 400 * MB
N_FILES = 20_000
N_REPO_FILES = 10_000


def log(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


@dataclass
class Bench:
    """What every part runs with, and where it puts what it measured."""

    tools: Tools
    servers: Servers
    base: Path  # a temp dir: every world lives under it
    n: int  # runs per measurement
    quick: bool = False
    real_500: bool = False
    results: Results = field(default_factory=Results)
    meta: dict[str, Any] = field(default_factory=dict)  # for the JSON: the bare bwrap argv, srt

    def world(self, label: str) -> World:
        return World(self.tools, self.servers, self.base, label)


def _started(t: Timed, what: str) -> Timed:
    if t.rc != 0 or t.ready is None:
        raise RuntimeError(f"{what} failed (rc {t.rc}): {t.stderr.strip()[-500:]}")
    return t


# -- 1. start --------------------------------------------------------------------------------


def start(b: Bench) -> None:
    n, w, tools, res = b.n, b.world("start"), b.tools, b.results
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
        return _started(time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws_tj),
                                              "--name", f"tj{i}", "--detach"), w.env, ws_tj / READY),
                        "tmuxjail start")

    def tmux_start(name: str, ws: Path, argv: list[str]) -> Timed:
        return _started(time_until_ready([tools.tmux, "-L", w.socket, "new-session", "-d", "-s", name, "-c", str(ws),
                                          *argv], w.env, ws / READY), f"tmux new-session {name}")

    # warm-up (not counted): the first start also fills the identity cache and the page cache
    tj_start(0)
    w.kill_session("tj0")
    tmux_start("bw0", ws_bw, bw_argv)
    w.kill_session("bw0")

    tj_ready: list[float | None] = []
    tj_exit: list[float | None] = []
    tj_rss: list[float | None] = []
    tj_pane_rss: list[float | None] = []
    bw_ready: list[float | None] = []
    bw_pane_rss: list[float | None] = []
    tm_ready: list[float | None] = []
    srt_ready: list[float | None] = []
    cold_ready: list[float | None] = []
    srt_error = None
    pane_names = set()
    policies = Path(w.env["XDG_STATE_HOME"]) / "tmuxjail" / "policies"  # the warm start's cache (tmuxjail.warm)
    for i in range(1, n + 1):
        shutil.rmtree(policies, ignore_errors=True)  # a miss: the policy resolved in full (and cached again)
        cold_ready.append(tj_start(n + i).ready)
        w.kill_session(f"tj{n + i}")

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

    row = res.add("start", "tmuxjail start --mode isolated --detach → ready (warm)", "s", tj_ready,
                  note="invocation until the stand-in inside the pane wrote its ready file; warm: the same "
                       "request as the start before it, so its policy comes from the cache (issue 18.1)")
    row.compare("bare bwrap in tmux new-session -d (dry-run argv)", bw_ready, target=8.0)
    row.compare("stand-in in tmux new-session -d, no sandbox (info)", tm_ready)
    if srt is None:
        row.compare("srt in tmux new-session -d (peer launcher)", skipped="skipped: not installed")
    elif srt_error or not srt_ready:
        row.compare("srt in tmux new-session -d (peer launcher)", skipped=f"skipped: failed: {srt_error}"[:200])
    else:
        row.compare("srt in tmux new-session -d (peer launcher)", srt_ready, target=0.25)
    res.add("start", "tmuxjail start → command exited (info)", "s", tj_exit,
            note="the CLI waits for bwrap's child-pid status before returning")
    cold = res.add("start", "tmuxjail start → ready, policy cache emptied first (miss; info)", "s", cold_ready)
    cold.compare("tmuxjail start → ready (warm)", tj_ready)

    # Where the time goes (info): the resolution alone (no tmux, no launch), and the in-pane
    # launcher's own interpreter start-up.
    dry: list[float | None] = []
    launcher: list[float | None] = []
    for _ in range(n):
        dry.append(time_cmd(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws_tj),
                                 "--dry-run", "--json"), w.env)[0])
        launcher.append(time_any([tools.tj_py, "-E", "-m", "tmuxjail.pane.launch"], w.env))
    res.add("start", "breakdown: tmuxjail start --dry-run (full resolution, never cached; info)", "s", dry)
    res.add("start", "breakdown: launcher start-up, python -E -m tmuxjail.pane.launch (info)", "s", launcher)
    res.imports["tmuxjail start --dry-run"] = importtime(
        tools.tj_py, w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws_tj), "--dry-run"), w.env)
    res.imports["tmuxjail start (warm)"] = importtime(
        tools.tj_py, w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws_tj), "--name", "imports",
                          "--detach"), w.env)
    w.kill_session("imports")

    mem = res.add("memory", "peak RSS of `tmuxjail start` (wait4 ru_maxrss)", "MB", tj_rss)
    mem.absolute_target(60.0, "target ≤ 60 MB")
    left = res.add("memory", f"RSS the launcher leaves: VmRSS of pane pid ({'/'.join(sorted(pane_names))})", "MB",
                   tj_pane_rss, note="after the launcher exec'd bwrap")
    left.compare("VmRSS of the bare bwrap pane pid", bw_pane_rss)
    w.tmux("kill-server", check=False)
    b.meta.update(bwrap_argv=bw_argv, srt=srt)


# -- 1a. the jail's share of the user's limits (issue 27.2) ----------------------------------


def limits(b: Bench) -> None:
    """A warm start with the jail's share of the per-user counts (the launcher's own user and
    mount namespace, /proc/sys/user/* lowered, a devpts with max=) against the same start in a
    world whose config accepts their absence (accept_missing_guards = ["jail-namespace-limits"]),
    interleaved run by run, alternating which goes first. Target (issue 27): <= 1.05x."""
    n, res = b.n, b.results
    worlds = {}
    for label, config in (("on", ""), ("off", 'accept_missing_guards = ["jail-namespace-limits"]\n')):
        w = b.world(f"limits-{label}")
        make_standin(w.bin / "codex", SMALL_SIZE)
        cfg = w.home / ".config" / "tmuxjail"
        cfg.mkdir(parents=True)
        (cfg / "config.toml").write_text(config)
        w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
        worlds[label] = (w, w.workspace("ws"))
    shares = {}
    for label, (w, ws) in worlds.items():
        shares[label] = (w.dry_run(ws)["policy"].get("limits") or {}).get("user")
    if not shares["on"] or shares["off"]:
        raise RuntimeError(f"the two worlds do not differ by the namespace share: {shares}")

    def one(label: str, i: int) -> float | None:
        w, ws = worlds[label]
        t = _started(time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                           "--name", f"l{i}", "--detach"), w.env, ws / READY),
                     f"tmuxjail start (limits {label})")
        w.kill_session(f"l{i}")
        return t.ready

    for label in worlds:  # warm-up, not counted: fills the policy and identity caches
        one(label, 0)
    got: dict[str, list[float | None]] = {"on": [], "off": []}
    for i in range(1, n + 1):
        for label in (("on", "off") if i % 2 else ("off", "on")):
            got[label].append(one(label, i))
    for w, _ in worlds.values():
        w.tmux("kill-server", check=False)
    row = res.add("start", "tmuxjail start → ready, with the jail's namespace share (warm)", "s", got["on"],
                  note="the launcher's own user+mount namespace: /proc/sys/user/* at the share, devpts max= "
                       "(issue 27.2)")
    row.compare("same, accept_missing_guards = [\"jail-namespace-limits\"] (no namespace share)", got["off"],
                target=1.05)


BIG_OPT_ENTRIES = 38_000  # the /opt of issue 30.7: a few npm trees and virtual environments


def _npm_like(root: Path, entries: int) -> int:
    """Fill root with about `entries` names shaped like npm trees (a package: its directory,
    package.json, index.js, README.md, LICENSE, lib/, lib/main.js) in four apps; the count made."""
    made, apps = 0, 4
    for a in range(apps):
        mods = root / f"app{a}" / "node_modules"
        mods.mkdir(parents=True)
        made += 2
        for j in range((entries - 2 * apps) // (7 * apps)):
            pkg = mods / f"pkg-{j}"
            (pkg / "lib").mkdir(parents=True)
            for name in ("package.json", "index.js", "README.md", "LICENSE", "lib/main.js"):
                (pkg / name).write_bytes(b"{}\n")
            made += 7
    return made


def big_opt(b: Bench) -> None:
    """A warm root start with /opt holding ~38,000 more entries (a temporary /opt/tjbench-big-*,
    moved in before and out after each of its runs) against the same start without it,
    interleaved run by run, alternating which goes first. Target (issue 30.7): <= 1.05x."""
    import tempfile

    n, res = b.n, b.results
    name = "tmuxjail start → ready as root, /opt with 38,000 more entries (warm)"
    if os.getuid() != 0:
        res.add("start", name, "s", [], note="skipped: only a root start walks for root-only files")
        return
    staged = Path(tempfile.mkdtemp(prefix="tjbench-big-", dir="/var/tmp"))
    target = Path("/opt") / staged.name
    try:
        if not Path("/opt").is_dir() or os.stat("/opt").st_dev != staged.stat().st_dev:
            res.add("start", name, "s", [], note="skipped: /opt is missing or not on /var/tmp's filesystem")
            return
        made = _npm_like(staged / "tree", BIG_OPT_ENTRIES)
        w = b.world("bigopt")
        make_standin(w.bin / "codex", SMALL_SIZE)
        ws = w.workspace("ws")
        w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")

        def one(label: str, i: int) -> float | None:
            if label == "big":
                os.rename(staged / "tree", target)
            try:
                t = _started(time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                                   "--name", f"{label}{i}", "--detach"), w.env, ws / READY),
                             f"tmuxjail start (/opt {label})")
            finally:
                if label == "big":
                    os.rename(target, staged / "tree")
            w.kill_session(f"{label}{i}")
            return t.ready

        for label in ("big", "plain"):  # warm-up, not counted: fills the policy and identity caches
            one(label, 0)
        got: dict[str, list[float | None]] = {"big": [], "plain": []}
        for i in range(1, n + 1):
            for label in (("big", "plain") if i % 2 else ("plain", "big")):
                got[label].append(one(label, i))
        w.tmux("kill-server", check=False)
        row = res.add("start", name, "s", got["big"],
                      note=f"{made} entries in {target} (npm-like trees), the CLI outside /opt (issue 30.7)")
        row.compare("same, without the big tree", got["plain"], target=1.05)
    finally:
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(staged, ignore_errors=True)


BIG_WS_ENTRIES = 30_000  # a workspace with a node_modules: the audit's snapshot walks all of it


def big_workspace(b: Bench) -> None:
    """A warm start in a workspace holding ~30,000 entries (npm-like trees) against the same
    start in an empty workspace, interleaved run by run: what the audit's snapshot of the
    workspace (walked in a child while the policy loads) still adds. Info: no target."""
    n, res, w = b.n, b.results, b.world("bigws")
    make_standin(w.bin / "codex", SMALL_SIZE)
    big, empty = w.workspace("big"), w.workspace("empty")
    made = _npm_like(big, BIG_WS_ENTRIES)
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")

    def one(ws: Path, i: int) -> float | None:
        t = _started(time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                           "--name", f"{ws.name}{i}", "--detach"), w.env, ws / READY),
                     f"tmuxjail start ({ws.name} workspace)")
        w.kill_session(f"{ws.name}{i}")
        return t.ready

    for ws in (big, empty):  # warm-up, not counted
        one(ws, 0)
    got: dict[str, list[float | None]] = {"big": [], "empty": []}
    for i in range(1, n + 1):
        for ws in ((big, empty) if i % 2 else (empty, big)):
            got[ws.name].append(one(ws, i))
    w.tmux("kill-server", check=False)
    row = res.add("start", "tmuxjail start → ready, a workspace with 30,000 entries (warm, info)", "s", got["big"],
                  note=f"{made} entries (npm-like trees) in the workspace; the audit's snapshot walks them")
    row.compare("same, an empty workspace", got["empty"])


# -- 1b. the in-pane launcher, to its exec of bwrap (issue 18.3) --------------------------------

LAUNCH_STUB = ("import sys, os; sys.path[:0] = [{root!r}]; os.execve = lambda *a: os._exit(0); "
               "from tmuxjail.pane.launch import main; main(sys.argv[1:])")


def launcher(b: Bench) -> None:
    """The launcher's whole path up to exec'ing bwrap, on a real spec: the pane command
    (python -I -S -c STUB --fp FP SPEC) with only os.execve replaced by an exit. A spec and a
    store row are made from `start --dry-run`, as a real start makes them."""
    import sqlite3

    tools, res = b.tools, b.results
    w = b.world("launcher")
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
    landlock = subprocess.run([tools.tj_py, "-c", "from tmuxjail.sandbox import landlock as l; print(l.abi() >= l.MIN_ABI)"],
                              capture_output=True, text=True, check=False).stdout.strip() == "True"
    spec = json.dumps({
        "session_id": "bench", "fingerprint": d["fingerprint"], "policy": pol, "argv": d["cli_argv"], "call": d["sandbox_call"],
        "env": dict(pol["env_set"]), "store": str(store), "status_file": str(spec_path.with_suffix(".status")),
        "machine": platform.machine(), "sandboxed": True, "layout": d["host_layout"], "landlock_scope": landlock})
    root = subprocess.run([tools.tj_py, "-c", "import os, tmuxjail; print(os.path.dirname(os.path.dirname(tmuxjail.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    pane_cmd = [tools.tj_py, "-I", "-S", "-c", LAUNCH_STUB.format(root=root), "--fp", d["fingerprint"], str(spec_path)]
    baseline = [tools.tj_py, "-I", "-S", "-c", "pass"]

    def write_spec() -> None:
        fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, spec.encode())
        os.close(fd)

    def run_launcher() -> float:
        write_spec()
        t0 = time.perf_counter()
        p = subprocess.run(pane_cmd, env={"PATH": "/usr/bin:/bin", "TERM": "xterm"}, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, check=False)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"launcher exited {p.returncode}: {p.stderr.strip()[-300:]}")
        return dt

    run_launcher()  # warm-up
    time_any(baseline, w.env)
    lt: list[float | None] = []
    bt: list[float | None] = []
    for _ in range(3 * b.n):  # cheap: three times the runs, interleaved
        lt.append(run_launcher())
        bt.append(time_any(baseline, w.env))
    row = res.add("launcher", "launcher → exec bwrap (python -I -S -c STUB, real spec, isolated)", "s", lt,
                  note="reads and deletes the spec, checks fingerprint, store and argv, keyring, "
                       + ("pids cgroup, " if os.getuid() == 0 else "") + "Landlock, seccomp, binds by fd")
    row.compare(f"{tools.tj_py} -I -S -c pass", bt, target=2.0)
    write_spec()
    res.imports["the launcher, to exec"] = importtime(tools.tj_py, pane_cmd[1:], {"PATH": "/usr/bin:/bin"}, top=6)
    if os.getuid() == 0:  # the pids cgroups of the launchers that ran (empty now), v2 or v1
        for g in [*Path("/sys/fs/cgroup/tmuxjail").glob("bench-*"), *Path("/sys/fs/cgroup/pids/tmuxjail").glob("bench-*")]:
            try:
                g.rmdir()
            except OSError:
                pass


# -- 1c. failing starts answer at once (issue 18.6) --------------------------------------------


FAILURES = {
    "tmux server killed during start": ("kill-server", "tmux server exited"),
    "jail cannot come up (launcher replaced by a failing command)":
        ("respawn-pane -k \"sh -c 'echo bwrap: cannot come up >&2; exit 1'\"", "bwrap: cannot come up"),
}


def failure(b: Bench) -> None:
    """tmuxjail start when the tmux server is killed right after it creates the session, and
    when the jail cannot come up (a hook replaces the pane's launcher with a command that fails
    the way bwrap does), next to a start that succeeds: each answers with its reason."""
    w = b.world("failure")
    make_standin(w.bin / "codex", SMALL_SIZE)
    ws = w.workspace("f")

    def timed_start(i: int, hook: str | None) -> tuple[float, str]:
        w.tmux("kill-server", check=False)
        for _ in range(50):  # the previous server may still be on its way out
            if w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400", check=False).returncode == 0:
                break
            time.sleep(0.1)
        if hook:
            w.tmux("set-hook", "-g", "session-created", hook)
        t0 = time.perf_counter()
        p = subprocess.run(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                "--name", f"f{i}-{len(hook or '')}", "--detach"),
                           env=w.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        return time.perf_counter() - t0, (p.stderr.strip().splitlines() or [""])[0] if p.returncode else ""

    timed_start(0, None)  # warm-up: identity cache, page cache
    times: dict[str, list[float | None]] = {k: [] for k in FAILURES}
    wrong: dict[str, list[str]] = {k: [] for k in FAILURES}  # errors that did not name the reason
    ok: list[float | None] = []
    for i in range(1, b.n + 1):
        t, err = timed_start(i, None)
        if err:
            raise RuntimeError(f"the successful start failed: {err}")
        ok.append(t)
        for name, (hook, reason) in FAILURES.items():
            t, err = timed_start(i, hook)
            if reason not in err:
                wrong[name].append(err)
            times[name].append(t)
    for name, xs in times.items():
        reason = FAILURES[name][1]
        row = b.results.add("failure", f"start → error: {name}", "s", xs,
                            note=f"the error names it: {reason!r}" if not wrong[name] else
                            f"the error should name {reason!r}; {len(wrong[name])} runs said {wrong[name][0]!r}")
        row.absolute_target(1.0, "target ≤ 1 s")
        row.check("the error names the real reason", len(wrong[name]), len(xs))
        row.compare("a start that succeeds (info)", ok)
    w.tmux("kill-server", check=False)


# -- 2. identity cache: 400 MB vs 1 KB ---------------------------------------------------------


def identity(b: Bench) -> None:
    n, w, res = b.n, b.world("identity"), b.results
    big = make_standin(w.root / "bin-400m" / "codex", BIG_SIZE)
    small = make_standin(w.root / "bin-1k" / "codex", SMALL_SIZE)
    env_big, env_small = w.env_with_bin(big.parent), w.env_with_bin(small.parent)
    ws = w.workspace("id")
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
    count = 0

    def timed_start(env: dict[str, str]) -> Timed:
        nonlocal count
        count += 1
        name = f"id{count}"
        t = time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                  "--name", name, "--detach"), env, ws / READY)
        w.kill_session(name)
        return _started(t, "tmuxjail start")

    # In-process hash throughput of identity.sha256_file, no cache (what a cold start pays).
    sys.path.insert(0, str(REPO))
    from tmuxjail.identity import sha256_file

    hash_s = []
    for _ in range(2 if n < 5 else 3):
        t0 = time.perf_counter()
        sha256_file(big, None)
        hash_s.append(time.perf_counter() - t0)

    timed_start(env_small)  # warm-up: interpreter, page cache, and the 1 KB stand-in's digest
    cold: list[float | None] = []
    for _ in range(max(2, n // 3)):
        os.utime(big)  # new mtime and ctime: the stat key changes, the cache must miss
        cold.append(timed_start(env_big).ready)
    warm_big: list[float | None] = []
    warm_small: list[float | None] = []
    for _ in range(n):
        warm_big.append(timed_start(env_big).ready)
        warm_small.append(timed_start(env_small).ready)

    row = res.add("identity", "warm start, 400 MB executable", "s", warm_big)
    row.compare("warm start, 1 KB executable", warm_small, target=1.1)
    cold_first = cold[0] or 0.0
    crow = res.add("identity", "cold start, 400 MB executable (touched: re-hash)", "s", cold,
                   note=f"first cold start: {cold_first * 1000:.0f} ms")
    crow.compare("warm start, 400 MB executable", warm_big)
    extra = cold_first - statistics.median(x for x in warm_big if x is not None)
    res.add("identity", "hash throughput, sha256_file in-process, no cache", "MB/s",
            [BIG_SIZE / MB / s for s in hash_s])
    res.add("identity", "hash throughput implied by 1st cold start (info)", "MB/s",
            [BIG_SIZE / MB / extra] if extra > 0 else [],
            note=f"(first cold − median warm) = {extra * 1000:.0f} ms for 400 MB")
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
    fp = template.fingerprint or ""
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
                  "tmuxjail.pane.launch", "--fp", fp, ";",
                  "set-option", "-t", f"={name}:", "@tmuxjail_id", name, ";",
                  "set-option", "-t", f"={name}:", "@tmuxjail_fp", fp, ";"]
        if len(batch) > 400:  # tmux refuses messages over ~16 KB
            w.tmux(*batch[:-1])
            batch = []
    if batch:
        w.tmux(*batch[:-1])
    store.close()


PANE_FORMAT = "\x1f".join(f"#{{{f}}}" for f in (
    "session_name", "window_id", "pane_id", "pane_pid", "pane_dead", "pane_dead_status", "pane_current_command",
    "@tmuxjail_id", "@tmuxjail_fp", "pane_start_command"))


# 18.7's floor: the least any libtmux-based list can do, in the same interpreter as tmuxjail's:
# import libtmux and run the one list-panes -a query for the fields list reads.
LIBTMUX_FLOOR = ("import sys, libtmux; "
                 "libtmux.Server(socket_name=sys.argv[1]).cmd('list-panes', '-a', '-F', sys.argv[2])")


def _measure_list(b: Bench, w: World, label: str, how: str) -> None:
    sys.path.insert(0, str(REPO))
    from tmuxjail.tmux import PANE_FIELDS

    floor_fmt = "\x1f".join(f"#{{{f}}}" for f in PANE_FIELDS)
    ls_t: list[float | None] = []
    ver_t: list[float | None] = []
    panes_t: list[float | None] = []
    floor_t: list[float | None] = []
    _, out = time_cmd(w.tj("list", "--json"), w.env)  # warm-up, and a sanity check
    rows = json.loads(out)
    running = sum(1 for r in rows if r.get("status") == "running")
    for _ in range(max(b.n, 5)):
        ls_t.append(time_cmd(w.tj("list", "--json"), w.env)[0])
        floor_t.append(time_cmd([b.tools.tj_py, "-c", LIBTMUX_FLOOR, w.socket, floor_fmt], w.env)[0])
        ver_t.append(time_cmd([str(b.tools.tj), "--version"], w.env)[0])
        panes_t.append(time_cmd([b.tools.tmux, "-L", w.socket, "list-panes", "-a", "-F", PANE_FORMAT], w.env)[0])
    row = b.results.add("list", f"tmuxjail list --json, {label} session{'s' if label != '1' else ''}"
                        f"{' (fast path)' if 'fast' in how else ''}", "s", ls_t,
                        note=f"{how}; list returned {len(rows)} rows, {running} running; activity column included")
    row.compare("floor: python -c 'import libtmux' + its one list-panes -a", floor_t,
                target=1.5 if label == "500" else None)
    row.compare("tmuxjail --version (info)", ver_t)
    row.compare("the one tmux list-panes -a call list makes (info)", panes_t)


def list_sessions(b: Bench) -> None:
    w = b.world("list")
    make_standin(w.bin / "codex", SMALL_SIZE)
    have = 0

    def grow(to: int, real: bool) -> None:
        nonlocal have
        if real:
            for k in range(have, to):
                ws = w.workspace(f"l{k}")
                _started(time_until_ready(w.tj("start", "codex", "--mode", "isolated", "--workspace", str(ws),
                                               "--name", f"l{k}", "--detach"), w.env, ws / READY),
                         f"tmuxjail start l{k}")
        else:
            _fast_sessions(w, to - have, have)
        have = to

    log("list: 1 real session")
    grow(1, True)
    _measure_list(b, w, "1", "real starts")
    log("list: 50 real sessions")
    grow(50, True)
    _measure_list(b, w, "50", "real starts")
    if b.real_500:
        log("list: 500 real sessions (slow)")
        grow(500, True)
        _measure_list(b, w, "500", "real starts")
    else:
        log("list: 500 sessions (50 real + 450 inserted via Store, tmux panes running sleep)")
        grow(500, False)
        _measure_list(b, w, "500", "fast path: 50 real + 450 Store rows with tmux sessions running sleep")
    w.tmux("kill-server", check=False)


# -- 4. CLI start-up ---------------------------------------------------------------------------


def cli(b: Bench) -> None:
    w, tools, res = b.world("cli"), b.tools, b.results  # empty store, no tmux server on this socket
    version, listing, python = [str(tools.tj), "--version"], w.tj("list"), [tools.tj_py, "-c", "pass"]
    ver: list[float | None] = []
    lst: list[float | None] = []
    py: list[float | None] = []
    for argv in (version, listing, python):
        time_cmd(argv, w.env)  # warm-up
    for _ in range(3 * b.n):
        ver.append(time_cmd(version, w.env)[0])
        lst.append(time_cmd(listing, w.env)[0])
        py.append(time_cmd(python, w.env)[0])
    res.add("cli", "tmuxjail --version", "s", ver).compare(f"{tools.tj_py} -c pass", py, target=2.5)
    res.add("cli", "tmuxjail list (empty store)", "s", lst).compare(f"{tools.tj_py} -c pass", py)
    res.imports["tmuxjail list"] = importtime(tools.tj_py, w.tj("list"), w.env)
    res.imports["tmuxjail --version"] = importtime(tools.tj_py, version, w.env)


# -- 5. work inside the jail -------------------------------------------------------------------


def _git_repo(w: World, repo: Path, git: str) -> None:
    log(f"work: creating a git repo of {N_REPO_FILES} files")
    for i in range(N_REPO_FILES):
        d = repo / f"d{i // 100:03d}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n")
    genv = dict(w.env, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
                GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run([git, "-C", str(repo), *args], env=genv, check=True, capture_output=True)


def work(b: Bench) -> None:
    tools, res = b.tools, b.results
    if not tools.work_py or not tools.git:
        res.add("work", "work inside the jail", "s", [], note="skipped: /usr/bin/python3 or git missing")
        return
    w = b.world("work")
    make_standin(w.bin / "codex", SMALL_SIZE)
    ws = w.workspace("work")
    script = ws / "_workload.py"
    script.write_text(resources.files(__package__).joinpath("workload.py").read_text())
    repo = ws / "repo"
    _git_repo(w, repo, tools.git)
    argv = w.dry_run_argv(ws)
    prefix = argv[: argv.index("--") + 1]
    cases = {
        "files": (["files", str(ws), str(N_FILES)], f"create+stat+delete {N_FILES:,} files in workspace"),
        "git": (["git", str(repo)], f"git status, repo of {N_REPO_FILES:,} files"),
    }
    for key, (args, label) in cases.items():
        cmd = [tools.work_py, str(script), *args]
        inside_inner: list[float | None] = []
        outside_inner: list[float | None] = []
        inside_wall: list[float | None] = []
        outside_wall: list[float | None] = []
        if key == "git":  # warm-up both sides: the first status refreshes the index
            time_cmd(prefix + cmd, w.env, cwd=ws)
            time_cmd(cmd, w.env, cwd=ws)
        # 20,000 creates take seconds (and vary a lot on a busy disk): fewer rounds with --quick,
        # and no new pair once the time budget is spent (always at least one pair)
        rounds = min(b.n, 2) if (b.quick and key == "files") else b.n
        budget = time.perf_counter() + (15 if b.quick else 120)
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
        row = res.add("work", f"{label}: inside jail", "s", inside_inner,
                      note="timed inside the workload (bwrap argv from --dry-run, workload as command); "
                           "the wall-clock row adds bwrap set-up and python start-up")
        row.compare("same, outside", outside_inner, target=1.05)
        res.add("work", f"{label}: inside, wall clock (info)", "s", inside_wall).compare("same, outside", outside_wall)


# -- 6. worktree sessions (issue 32) -----------------------------------------------------------

WT_FILES = 10_000
LAND_COMMITS = 100


def _bench_git(w: World) -> dict[str, str]:
    return dict(w.env, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
                GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid")


def _repo_of_files(w: World, repo: Path, files: int) -> None:
    for i in range(files):
        d = repo / f"d{i // 100:03d}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n")
    # Packed, as a clone leaves a repository (loose, its 10,000 blobs cost every object lookup).
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "bench"], ["repack", "-adq"]):
        subprocess.run(["git", "-C", str(repo), *args], env=_bench_git(w), check=True, capture_output=True)


def worktrees(b: Bench) -> None:
    """`start --worktree` against `git worktree add` plus a start in that existing directory (their
    sum, run by run), on a clone of this repository and on a 10,000-file one; and `land` of 100
    commits against `git merge` of the same commits already fetched (issue 32's targets)."""
    n, res, w = b.n, b.results, b.world("worktree")
    make_standin(w.bin / "codex", SMALL_SIZE)
    w.tmux("new-session", "-d", "-s", "keeper", "sleep", "86400")
    genv = _bench_git(w)
    repos = {"this repository": w.root / "repos" / "tmuxjail", f"{WT_FILES:,} files": w.root / "repos" / "big"}
    repos["this repository"].parent.mkdir(parents=True, exist_ok=True)
    # This repository's files at HEAD, in a repository of their own (a clone would need this user to
    # own the checkout: git refuses another user's repository).
    mine = repos["this repository"]
    mine.mkdir()
    tree = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(REPO), "archive", "HEAD"], env=genv, check=True,
                          capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(mine)], input=tree, check=True)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "bench"], ["repack", "-adq"]):
        subprocess.run(["git", "-C", str(mine), *args], env=genv, check=True, capture_output=True)
    _repo_of_files(w, repos[f"{WT_FILES:,} files"], WT_FILES)

    def ready_in(path: Path, argv: list[str], what: str) -> float | None:
        return _started(time_until_ready(argv, w.env, path / READY), what).ready

    for label, repo in repos.items():
        wt_dir = repo.parent / (repo.name + ".worktrees")
        made: list[float | None] = []
        apart: list[float | None] = []
        for i in range(n + 1):
            t = ready_in(wt_dir / f"w{i}", w.tj("start", "codex", "--mode", "isolated", "--workspace", str(repo),
                                                "--worktree", f"w{i}", "--name", f"{repo.name}w{i}", "--detach"),
                         "tmuxjail start --worktree")
            w.kill_session(f"{repo.name}w{i}")
            plain = repo.parent / f"{repo.name}-plain{i}"
            t0 = time.perf_counter()
            subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", f"plain{i}", str(plain)], env=genv,
                           check=True, capture_output=True)
            add = time.perf_counter() - t0
            s = ready_in(plain, w.tj("start", "codex", "--mode", "isolated", "--workspace", str(plain),
                                     "--name", f"{repo.name}p{i}", "--detach"), "tmuxjail start (existing directory)")
            w.kill_session(f"{repo.name}p{i}")
            if i:  # the first of each is a warm-up
                made.append(t)
                apart.append(None if s is None else s + add)
        res.add("worktree", f"start --worktree → ready, {label}", "s", made).compare(
            "git worktree add + start in that directory", apart, target=1.3)

    repo = repos[f"{WT_FILES:,} files"]
    # Even runs land straight after the agent's commits (the import is part of the land); odd
    # runs after `tmuxjail diff`, as a reviewed branch is landed (its objects are home already).
    landed: dict[bool, list[float | None]] = {False: [], True: []}
    merged: dict[bool, list[float | None]] = {False: [], True: []}
    for i in range(2 * (n + 1)):
        name, reviewed = f"l{i}", bool(i % 2)
        subprocess.run(w.tj("start", "shell", "--mode", "isolated", "--workspace", str(repo), "--worktree", name,
                            "--name", f"land{i}", "--detach"), env=w.env, check=True, capture_output=True)
        subprocess.run(w.tj("stop", f"land{i}"), env=w.env, check=True, capture_output=True)
        meta = next(json.loads(p.read_text()) for p in (w.home / ".local/state/tmuxjail/worktrees").glob("*/meta.json")
                    if json.loads(p.read_text())["name"] == name)
        agent = dict(genv, GIT_DIR=meta["gitdir"], GIT_WORK_TREE=meta["path"],
                     GIT_ALTERNATE_OBJECT_DIRECTORIES=meta["objects"])
        for c in range(LAND_COMMITS):  # the agent's 100 commits, written as the agent's git writes them
            Path(meta["path"], f"d{c // 100:03d}", f"f{c:05d}.txt").write_text(f"run {i} commit {c}\n")
            subprocess.run(["git", "commit", "-q", "-am", f"c{c}"], env=agent, check=True, capture_output=True)
        copy = repo.parent / f"merge{i}"
        subprocess.run(["git", "clone", "-q", "--local", str(repo), str(copy)], env=genv, check=True, capture_output=True)
        # The same commits in the copy (the agent's objects as its alternate): what `git merge` merges.
        with open(copy / ".git" / "objects" / "info" / "alternates", "a") as alt:
            alt.write(str(Path(meta["gitdir"], "objects")) + "\n")
        tip = Path(meta["gitdir"], "refs", "heads", meta["branch"]).read_text().strip()
        subprocess.run(["git", "-C", str(copy), "update-ref", "refs/heads/x", tip], env=genv, check=True,
                       capture_output=True)
        # Settled, as a user's checkout is: a clone's first command re-reads every file written in
        # the second its index was (racy git), which doubled this baseline's time.
        time.sleep(1.1)
        subprocess.run(["git", "-C", str(copy), "update-index", "-q", "--refresh"], env=genv, check=True,
                       capture_output=True)
        t0 = time.perf_counter()
        subprocess.run(["git", "-C", str(copy), "merge", "-q", "--no-edit", "x"], env=genv, check=True, capture_output=True)
        m = time.perf_counter() - t0
        if reviewed:
            subprocess.run(w.tj("diff", "--stat", name), env=w.env, check=True, capture_output=True)
        t0 = time.perf_counter()
        subprocess.run(w.tj("land", name), env=w.env, check=True, capture_output=True)
        t = time.perf_counter() - t0
        if i > 1:  # the first of each kind is a warm-up
            landed[reviewed].append(t)
            merged[reviewed].append(m)
        shutil.rmtree(copy, ignore_errors=True)
    baseline = "git merge of the same commits, already fetched, in a settled checkout"
    res.add("worktree", f"tmuxjail land, {LAND_COMMITS} commits, {WT_FILES:,} files", "s", landed[False]).compare(
        baseline, merged[False], target=2.0)
    res.add("worktree", f"tmuxjail land after tmuxjail diff (info), {LAND_COMMITS} commits, {WT_FILES:,} files", "s",
            landed[True]).compare(baseline, merged[True])
    w.tmux("kill-server", check=False)


PARTS: dict[str, Callable[[Bench], None]] = {
    "start": start, "limits": limits, "bigopt": big_opt, "bigws": big_workspace, "warmpath": warm_path, "launcher": launcher, "failure": failure, "identity": identity, "list": list_sessions,
    "cli": cli, "work": work, "firstscreen": firstscreen, "worktree": worktrees, "mcp": mcp_broker,
}
