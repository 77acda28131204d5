"""The steps of one mode's certification, in order. Each returns its checks; what a later step needs
goes on the Trial. Provider quirks come in through quirks.at()."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..net.policy import covers
from ..net.proxy import LOG_NAME, session_dir
from ..pane.command import is_launcher
from ..registry import Mode
from ..subpath import inside_any
from . import quirks
from .checks import Check, Trial, check, excerpt, hashes, parse_report
from .scratch import OWN_DIRS, PROBE_TIMEOUT, Run, wait_file
from .snapshot import changed, snapshot


def own(run: Run) -> tuple[str, ...]:
    return tuple(str(run.home / p) for p in OWN_DIRS)


def approve(run: Run, t: Trial) -> list[Check]:
    if t.mode != Mode.verified:
        return []
    appr = run.tj_json("approve", run.provider, "--yes", "--json")
    return [check("approval created in the scratch store", appr.get("id"),
                  {"approval": appr.get("id"), "store": str(run.home / ".local/state/tmuxjail/store.db")})]


def start(run: Run, t: Trial) -> list[Check]:
    t.home_before = snapshot(run.home, exclude=own(run))
    t.info = run.start(t.mode, t.name)
    if "error" in t.info:
        t.stopped = True
        return [check("starts in the jail", False, t.info["error"])]
    t.pane = t.info["tmux_pane"]
    return []


def first_screen(run: Run, t: Trial) -> list[Check]:
    pat, text = run.wait_screen(t.pane)
    checks = [check("first screen", pat, {"pattern": pat, "screen": excerpt(text)})]
    proc = run.seen_process
    pane_pid = run.tmux("display-message", "-p", "-t", t.pane, "#{pane_pid}").strip()
    try:
        comm: str | None = Path(f"/proc/{pane_pid}/comm").read_text().strip()
    except (OSError, ValueError):
        comm = None  # the pane's process is gone already
    start_cmd = run.tmux("display-message", "-p", "-t", t.pane, "#{pane_start_command}")
    checks.append(check("pane process is the jail",
                        (comm == "bwrap" or (comm is None and is_launcher(start_cmd))) and proc is not None,
                        {"pane_process": comm or "exited (seen running under bwrap)",
                         "cli": proc[0] if proc else None, "cwd": proc[1] if proc else None}))
    return checks + quirks.at(run, t, "started")


def network(run: Run, t: Trial) -> list[Check]:
    """Strict modes go out through the session's proxy: what the CLI asked it for at start (host,
    port, decision, rule; offline the attempt is the evidence), and nothing outside the allow list
    went through."""
    if t.mode == Mode.compatibility:
        return []
    t.destinations = destinations(run, t.info)
    allow = (run.tj_json("show", t.name, "--json").get("policy") or {}).get("allow_domains", [])
    through = [d for d in t.destinations if d["decision"] == "allowed" and not allowed_by(d["host"], allow)]
    return [check("network: what the CLI asked the proxy for at start (offline the attempt is the evidence)",
                  True, t.destinations or "nothing"),
            check("network: nothing outside the allow list went through", not through,
                  {"allow_domains": allow, "outside": through})]


def allowed_by(host: str, patterns: list[str]) -> bool:
    return any(covers(p, host) for p in patterns)


def destinations(run: Run, info: dict[str, Any]) -> list[dict[str, Any]]:
    """Each destination the CLI asked the session's proxy for, from its log, with how often."""
    path = Path(session_dir(str(run.home / ".local/state/tmuxjail/store.db"), info["id"]), LOG_NAME)
    time.sleep(1.0)  # a request the first screen did not wait for
    seen: dict[tuple[str, int, str, str], int] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            e = json.loads(line)
            key = (e["host"], e["port"], e["decision"], e["rule"])
        except (ValueError, KeyError, TypeError):
            continue
        seen[key] = seen.get(key, 0) + 1
    return [{"host": h, "port": p, "decision": d, "rule": r, "times": n} for (h, p, d, r), n in seen.items()]


def child(run: Run, t: Trial) -> list[Check]:
    """The CLI's child process, and the local-service bypass attempts made from it."""
    out = run.probe_out(t.mode)
    windows_before = run.tmux("list-windows", "-a", "-F", "#{window_id}").split()
    hits_before = [ln.hits for ln in run.listeners]
    checks: list[Check] = []
    if run.hooks.child_by_keys:
        run.tmux("send-keys", "-t", t.pane, "-l", run.adapter.certify_child_keys(str(run.probe), str(out)))
        run.tmux("send-keys", "-t", t.pane, "Enter")
        wait_file(out, PROBE_TIMEOUT)
    else:
        t.probe_names.append(f"{t.name}-child")
        screen = run.start_child(t.mode, t.probe_names[0], run.adapter.certify_child_args(str(run.probe), str(out)),
                                 out, run.hooks.probe_env)
        checks += quirks.at(run, t, "child", screen)
    r = t.report = parse_report(out.read_text()) if out.exists() else {}
    checks.append(check("child process ran", r, {"how": run.hooks.child_note, "report": r or None}))
    if r:
        checks += report_checks(run, t, r, hits_before)
    windows_after = run.tmux("list-windows", "-a", "-F", "#{window_id}").split()
    probes = {w for n in t.probe_names for w in run.tmux("list-windows", "-t", f"={n}", "-F", "#{window_id}").split()}
    checks.append(check("no window was added to the tmux server", set(windows_after) <= set(windows_before) | probes,
                        {"before": len(windows_before), "after": len(windows_after)}))
    checks += quirks.at(run, t, "report")
    t.child_sid = run.last_child.get("native_session_id")
    for n in t.probe_names:
        run.tj("stop", n, check=False)
    return checks


def report_checks(run: Run, t: Trial, r: dict[str, Any], hits_before: list[int]) -> list[Check]:
    """What the probe saw from inside the jail, mode by mode."""
    strict = t.strict
    want = "failed" if strict else "connected"
    # Compatibility keeps host /tmp and the host network namespace; a CLI whose own sandbox
    # runs there (Codex's, as an ordinary user) confines its child further, which is not ours
    # to certify either way.
    own_sandbox = not strict and bool(t.nested)
    return [
        check("child: in the jail's PID namespace", int(r.get("procs", "999")) < 50,
              {"pid1": r.get("pid1"), "processes_visible": r.get("procs")}),
        check("child: tmux new-window refused",
              r.get("tmux-L") == "failed" and r.get("tmux-S") == "failed" and r.get("env-TMUX") == "<unset>",
              {"tmux -L": r.get("tmux-L"), "tmux -S": r.get("tmux-S"), "TMUX": r.get("env-TMUX")}),
        check("child: planted host sockets " + (
              "unreachable" if strict else
              "reachable (compatibility keeps host /tmp and the host network namespace by design)" if not own_sandbox
              else "not ours to block in compatibility (the CLI's own sandbox confined its child)"),
              own_sandbox or (r.get("socket-path") == want and r.get("socket-abstract") == want),
              {"path": r.get("socket-path"), "abstract": r.get("socket-abstract"),
               "host_side_connections": [ln.hits - h for ln, h in zip(run.listeners, hits_before, strict=True)]}),
        check("child: host files " + ("hidden and read-only" if strict else "visible (compatibility)"),
              (r.get("home-canary") == "hidden" and r.get("outside-write") == "denied") if strict
              else r.get("home-canary") == "visible",
              {"home-canary": r.get("home-canary"), "outside-write": r.get("outside-write")}),
        check(f"child: state dir ~/{run.hooks.state_dir} writable", r.get("state-dir") == "writable" or
              (run.provider == "codex"),  # inside codex's own read-only-by-default sandbox: informative
              r.get("state-dir")),
    ]


def state(run: Run, t: Trial) -> list[Check]:
    """Where the state landed: written, only where the mode allows, and seen from inside."""
    t.state_base = base = Path(t.info["private_home"]) if t.mode == Mode.isolated else run.home
    state_dir = base / run.hooks.state_dir
    t.tokens = hashes(base, run.adapter.certify_tokens(t.mode))
    files = sorted(str(p.relative_to(base)) for p in state_dir.rglob("*") if p.is_file())[:40] \
        if state_dir.exists() else []
    checks = [check("state written", all(t.tokens.values()), {"where": str(state_dir), "files": files})]
    moved = changed(t.home_before, snapshot(run.home, exclude=own(run)))
    if t.mode == Mode.isolated:
        stray = moved
    elif t.mode == Mode.verified:
        pol = run.tj_json("show", t.name, "--json").get("policy") or {}
        allowed = [os.path.relpath(p, run.home) for p in pol.get("host_write", ())]
        # the parent of an approved path changes when tmuxjail creates that path before the launch
        parents = {os.path.dirname(a) or "." for a in allowed}
        stray = [p for p in moved if p not in parents and not inside_any(p, allowed)]
    else:
        stray = []
    checks.append(check("state only where the mode allows", not stray,
                        {"changed_in_scratch_home": moved[:30], "outside_allowed": stray[:30]}))
    r = t.report
    if r:
        said = r.get("state-seen", [])
        seen = {line.split()[0]: line.split()[1] for line in ([said] if isinstance(said, str) else said)}
        inside = {k: v for k, v in seen.items() if v != "absent"}
        checks.append(check("the jail sees the state it wrote", inside, {"inside_jail": seen}))
    return checks


def second_run(run: Run, t: Trial) -> list[Check]:
    run.tj("stop", t.name)
    time.sleep(0.5)
    left = run.leftovers()
    checks = [check("no process left after stop" + (" (no codex app-server)" if run.provider == "codex" else ""),
                    not left, left)]
    checks += quirks.at(run, t, "stopped")
    info2 = run.start(t.mode, t.name + "-2")
    pat2, _text2 = run.wait_screen(info2.get("tmux_pane", ""))
    tokens2 = hashes(t.state_base, run.adapter.certify_tokens(t.mode))
    checks.append(check("second run finds the earlier state", pat2 and tokens2 == t.tokens and all(t.tokens.values()),
                        {"first_screen": pat2, "state_tokens": tokens2, "unchanged": tokens2 == t.tokens}))
    return checks


def resume(run: Run, t: Trial) -> list[Check]:
    """Resume after the tmux server is gone: the CLI's own resume, same workspace, same state."""
    run.tmux("kill-server")
    time.sleep(0.5)
    left = run.leftovers()
    checks = [check("no process left after tmux kill-server", not left, left)]
    res = run.tj_json("resume", t.name + "-2", "--detach", "--json")
    pat3, text3 = run.wait_screen(res.get("tmux_pane", "")) if "error" not in res else (None, res["error"])
    proc3 = run.seen_process if pat3 else None
    tokens3 = hashes(t.state_base, run.adapter.certify_tokens(t.mode))
    # Exactly its own conversation (the id show --json records), or a new one when none had begun:
    # never the folder's latest, which may be another session's (issue 28.2).
    own_id = res.get("native_session_id")
    fresh = res.get("conversation") == "new"
    cli = proc3[0] if proc3 else ""
    argv_ok = bool(cli) and (not re.search(r"(^| )(resume|--resume|--continue|-c|--last)( |$)", cli) if fresh
                             else bool(re.search(run.hooks.resume_syntax, cli)) and str(own_id) in cli)
    checks.append(check(
        "resume relaunches the CLI's own resume of its own conversation, in the same workspace",
        pat3 and proc3 and argv_ok and proc3[1] == str(run.ws) and tokens3 == t.tokens,
        {"first_screen": pat3, "cli": proc3 and proc3[0], "cwd": proc3 and proc3[1], "conversation": own_id,
         "new_conversation": fresh, "state_tokens_unchanged": tokens3 == t.tokens, "screen": excerpt(text3, 8)}))
    checks += quirks.at(run, t, "resumed")
    run.tmux("kill-server")
    time.sleep(0.3)
    return checks


STEPS: tuple[Callable[[Run, Trial], list[Check]], ...] = (
    approve, start, first_screen, network, child, state, second_run, resume)


def certify_mode(run: Run, mode: Mode) -> dict[str, Any]:
    t = Trial(mode=mode, name=f"cert-{mode[:4]}")
    checks: list[Check] = []
    for step in STEPS:
        checks += step(run, t)
        if t.stopped:
            return {"mode": mode, "ok": False, "checks": checks}
    return {"mode": mode, "ok": all(c["ok"] for c in checks), "checks": checks, "destinations": t.destinations}
