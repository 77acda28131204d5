"""Checks only one provider needs, at named points of the steps: "started" (first screen shown),
"child" (the child session ran: its screen), "report" (the probe's report read), "stopped" (the
first run stopped), "resumed" (the resume checked). How a CLI is driven lives in its adapter."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from ..registry import Mode
from .checks import Check, Trial, check, excerpt
from .scratch import Run

Quirk = Callable[..., list[Check]]


def codex_no_daemon(run: Run, t: Trial) -> list[Check]:
    proc = run.seen_process
    return [check("codex: --no-daemon on the command line", proc and "--no-daemon" in proc[0], proc and proc[0])]


def codex_nested(run: Run, t: Trial, screen: str) -> list[Check]:
    out = run.probe_out(t.mode)
    nested = t.nested = out.exists()
    why = next((ln for ln in screen.splitlines() if "bwrap" in ln), None)
    if "under temporary dir" in screen:  # Codex's own words: CODEX_HOME is inside TMPDIR
        why = f"{why}: codex made no codex-linux-sandbox link because CODEX_HOME is under the temp dir"
    if not nested:
        # Root in the jail has no CAP_SETFCAP, which Linux >= 5.12 requires to map uid 0 into a
        # nested user namespace: Codex's bwrap cannot start. Its child still runs in our jail with
        # Codex's own sandbox off.
        t.probe_names.append(f"{t.name}-child-full")
        run.start_child(t.mode, t.probe_names[-1], ["sandbox", "-c", 'sandbox_mode="danger-full-access"', "--",
                                                    "/bin/sh", str(run.probe), str(out)], out, {})
    observed = {"nested": nested, "bwrap_said": why, "uid": os.getuid()}
    # Strict jails refuse nested user namespaces (bwrap --disable-userns): Codex's bwrap must fail
    # there, and the adapter runs Codex with its own sandbox off.
    if t.strict:
        return [check("codex: its own bwrap cannot nest in a strict jail (no nested user namespaces); "
                      "fell back to sandbox_mode=danger-full-access, still inside our jail", not nested, observed)]
    return [check("codex: its own bwrap nests inside ours" if nested or os.getuid() != 0 else
                  "codex: its own bwrap cannot nest as root (no CAP_SETFCAP to map uid 0); fell back to "
                  "sandbox_mode=danger-full-access, still inside our jail",
                  nested or os.getuid() == 0, observed)]


def codex_no_daemon_copy(run: Run, t: Trial) -> list[Check]:
    packages = t.state_base / ".codex/packages"
    return [check("codex: no daemon copy in CODEX_HOME", not packages.exists(), str(packages))]


CODEX_PROMPT = (r"Ask Codex to do anything", r"OpenAI Codex \(v")


def codex_own_conversations(run: Run, t: Trial) -> list[Check]:
    """Two sessions of Codex in one workspace, one state: each resumes its own conversation, not
    the folder's latest (28.2). Offline, with a made-up API key and the folder trusted (what
    `codex login --with-api-key` and the trust screen write), a message makes Codex create its
    conversation (the request then fails); tmuxjail learns the id from the file Codex holds open."""
    state = t.state_base / ".codex"
    auth, conf = state / "auth.json", state / "config.toml"
    if not auth.exists():
        auth.write_text(json.dumps({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-tmuxjail-certify-offline"}))
        auth.chmod(0o600)
    trusted = f'[projects."{run.ws}"]\ntrust_level = "trusted"\n'
    if trusted not in (conf.read_text() if conf.exists() else ""):
        with conf.open("a") as f:
            f.write("\n" + trusted)
    names = [f"{t.name}-c1", f"{t.name}-c2"]
    ids: dict[str, str | None] = {}
    screens: dict[str, str] = {}
    for n in names:
        # The first message as Codex's own [PROMPT] argument: sent at start, nothing typed.
        pane = run.start(t.mode, n, f"certify {n}").get("tmux_pane", "")
        pat, screens[n] = run.wait_screen(pane, CODEX_PROMPT)
        deadline = time.monotonic() + 30
        while pat and time.monotonic() < deadline and not ids.get(n):
            ids[n] = run.tj_json("show", n, "--json").get("native_session_id")
            time.sleep(0.5)
        if not ids.get(n):
            screens[n] = run.screen(pane)
    for n in names:
        run.tj("stop", n, check=False)
    argvs: dict[str, str | None] = {}
    for n in names:
        res = run.tj_json("resume", n, "--detach", "--json")
        pat, _ = run.wait_screen(res.get("tmux_pane", ""), CODEX_PROMPT)
        argvs[n] = run.seen_process[0] if pat and run.seen_process else None
        run.tj("stop", n, check=False)
    a, b = (ids.get(n) for n in names)
    ok = bool(a and b and a != b) and all(
        argvs[n] and f"resume {ids[n]}" in str(argvs[n]) and str(ids[other]) not in str(argvs[n])
        for n, other in zip(names, reversed(names), strict=True))
    return [check("codex: two sessions of one workspace each resume their own conversation (ids learned from "
                  "the file Codex holds open)", ok,
                  {"ids": ids, "resumed": argvs, **({} if ok else {"screens": {k: excerpt(v, 12) for k, v in screens.items()}})})]


def claude_relocation_and_bypass(run: Run, t: Trial) -> list[Check]:
    r, checks = t.report, []
    if r:
        checks.append(check(
            "claude: CLAUDE_CONFIG_DIR and CLAUDE_CODE_TMPDIR in the private home" if t.mode == Mode.isolated
            else "claude: relocation variables",
            (r.get("env-CLAUDE_CONFIG_DIR") == f"{run.home}/.claude"
             and r.get("env-CLAUDE_CODE_TMPDIR") == f"{run.home}/.claude/tmp") if t.mode == Mode.isolated else True,
            {k: r.get(f"env-{k}") for k in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR")}))
        if os.getuid() == 0:
            checks.append(check("claude: IS_SANDBOX=1 as root in strict modes",
                                (r.get("env-IS_SANDBOX") == "1") == t.strict, r.get("env-IS_SANDBOX")))
    name = f"cert-{t.mode[:4]}-bypass"
    info = run.start(t.mode, name, "--dangerously-skip-permissions", provider="claude-code")
    refusal = r"cannot be used with root/sudo privileges"
    pat, text = run.wait_screen(info.get("tmux_pane", ""), (refusal, *run.hooks.first_screen))
    expect_refusal = os.getuid() == 0 and not t.strict
    checks.append(check("claude: --dangerously-skip-permissions " + (
        "refused as root (no IS_SANDBOX in compatibility)" if expect_refusal else "accepted in the jail"),
        pat is not None and (pat == refusal) == expect_refusal,
        {"uid": os.getuid(), "matched": pat, "screen": excerpt(text, 4)}))
    run.tj("stop", name, check=False)
    return checks


def claude_resume_probe(run: Run, t: Trial) -> list[Check]:
    """Offline, Claude's TUI stops at its connectivity screen before loading a conversation, so ask
    its print mode from inside the jail about the conversation the child-process run (`-p` with
    --session-id) wrote: a known id reaches the login check, an unknown one says so."""
    if not t.child_sid:
        return []
    name = f"cert-{t.mode[:4]}-resume-p"
    # --resume with --session-id needs --fork-session: the fork proves the old id was found.
    info = run.start(t.mode, name, "-p", "--resume", t.child_sid, "--fork-session", "again", provider="claude-code")
    pat, text = run.wait_screen(info.get("tmux_pane", ""), (r"Not logged in", r"No conversation found", r"Error"))
    run.tj("stop", name, check=False)
    return [check("claude: `-p --resume <id>` finds the conversation inside the jail", pat == r"Not logged in",
                  {"matched": pat, "screen": excerpt(text, 4)})]


def cursor_install_root(run: Run, t: Trial) -> list[Check]:
    r = t.report
    if not r:
        return []
    return [check("cursor: install root inside HOME " + (
        "re-exposed read-only, nothing else of HOME" if t.strict else "visible as on the host"),
        (r.get("install-sibling") == "hidden" and r.get("install-root") == "read-only"
         and not r.get("local-bin", "").strip()) if t.strict else r.get("install-root") == "writable",
        {k: r.get(k) for k in ("install-sibling", "install-root", "local-bin")})]


def pi_offline(run: Run, t: Trial) -> list[Check]:
    return [check("pi: PI_OFFLINE=1 reaches the CLI", t.report.get("env-PI_OFFLINE") == "1",
                  t.report.get("env-PI_OFFLINE"))]


QUIRKS: dict[str, dict[str, Quirk]] = {
    "codex": {"started": codex_no_daemon, "child": codex_nested, "stopped": codex_no_daemon_copy,
              "resumed": codex_own_conversations},
    "claude-code": {"report": claude_relocation_and_bypass, "resumed": claude_resume_probe},
    "cursor": {"report": cursor_install_root},
    "pi": {"report": pi_offline},
}


def at(run: Run, t: Trial, point: str, *args: Any) -> list[Check]:
    quirk = QUIRKS.get(run.provider, {}).get(point)
    return quirk(run, t, *args) if quirk else []
