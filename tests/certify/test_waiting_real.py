"""Issue 28.22 on the real CLIs (where scripts/install-certify-clis.sh installed them): each one,
jailed and offline, reaches a first screen that waits for the user (a sign-in choice, a prompt),
and there `list` says `waiting`, the status indicator says ` waiting`, and the window falls quiet,
so tmux's silence alert (`@tmuxjail-waiting-alert`) fires. A CLI that ends offline before its
first screen skips with what it showed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from conftest import have_jail, wait_until
from test_certify import installed_bin, offline

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("provider", ["codex", "claude-code", "pi"])
def test_a_real_cli_at_its_first_screen_reads_as_waiting(env, provider):
    if (why := have_jail()) is not None:
        pytest.skip(why)
    bindir = installed_bin(provider)
    env.vars["PATH"] = f"{bindir}:{env.vars['PATH']}"  # before the stand-ins of the same names
    # The server, and so every pane and proxy it starts, with no route out (scripts/offline).
    subprocess.run([*offline(bindir), "tmux", *env.tmux_flags, "new-session", "-d", "-s", "home"],
                   env=env.environ(), check=True, timeout=30)
    env.tmux("source-file", str(REPO / "tmux.conf.example"))
    env.tmux("set", "-g", "@tmuxjail-waiting-alert", "3")
    info = env.json("start", provider, "--mode", "isolated", "--workspace", str(env.ws), "--name", "real",
                    "--detach", "--non-interactive", timeout=300)
    pane = info["tmux_pane"]
    screen = lambda: env.tmux("capture-pane", "-p", "-t", pane)  # noqa: E731
    wait_until(lambda: len(screen().split()) > 5, 120, f"{provider}'s first screen")
    time.sleep(8)  # past its start-up drawing
    if env.tmux("display-message", "-p", "-t", pane, "#{pane_dead}").strip() == "1":
        pytest.skip(f"{provider} ended offline before a screen that waits: {' '.join(screen().split())[:300]}")
    row = next(d for d in env.json("list") if d["name"] == "real")
    assert row["agent"] == "waiting", screen()
    assert "waiting]" in env.tmux("display-message", "-p", "-t", pane, "#{E:@tmuxjail-status}")
    wait_until(lambda: env.tmux("display-message", "-p", "-t", pane, "#{window_silence_flag}").strip() == "1",
               30, f"{provider}'s window to fall quiet: {screen()}")
