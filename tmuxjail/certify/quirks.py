"""Checks only one provider needs, at named points of the steps: "started" (first screen shown),
"child" (the child session ran: its screen), "report" (the probe's report read), "stopped" (the
first run stopped), "resumed" (the resume checked). How a CLI is driven lives in its adapter."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

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


def claude_relocation_and_bypass(run: Run, t: Trial) -> list[Check]:
    r, checks = t.report, []
    if r:
        checks.append(check(
            "claude: CLAUDE_CONFIG_DIR and CLAUDE_CODE_TMPDIR in the private home" if t.mode == "isolated"
            else "claude: relocation variables",
            (r.get("env-CLAUDE_CONFIG_DIR") == f"{run.home}/.claude"
             and r.get("env-CLAUDE_CODE_TMPDIR") == f"{run.home}/.claude/tmp") if t.mode == "isolated" else True,
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
    "codex": {"started": codex_no_daemon, "child": codex_nested, "stopped": codex_no_daemon_copy},
    "claude-code": {"report": claude_relocation_and_bypass, "resumed": claude_resume_probe},
    "cursor": {"report": cursor_install_root},
    "pi": {"report": pi_offline},
}


def at(run: Run, t: Trial, point: str, *args: Any) -> list[Check]:
    quirk = QUIRKS.get(run.provider, {}).get(point)
    return quirk(run, t, *args) if quirk else []
