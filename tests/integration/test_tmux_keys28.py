"""Issue 28, the keys and what a client sees: every key on a session whose id begins with 0, the
indicator beside a long title, refusals from menus, this server's resume menu, `?`, and the
waiting alert. Real tmux (a client attached in a second server's pane, where keys are pressed),
real bubblewrap, real SQLite."""

from __future__ import annotations

import functools
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import test_tmux_ux
from conftest import wait_until

ui = test_tmux_ux.ui  # the fixture: a real client attached in a second server's pane

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "tmux.conf.example"
PRESS = REPO / "scripts" / "press-every-key.py"
wait = functools.partial(wait_until, timeout=30.0)


def _bin(env) -> Path:
    """The tmuxjail the keys run: this interpreter (also where no console script is installed)."""
    b = env.bin / "tmuxjail"
    b.write_text(f"#!/bin/sh\nexec {sys.executable} -P -m tmuxjail \"$@\"\n")
    b.chmod(0o755)
    return b


def press_every_key(env, mode: str = "isolated") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PRESS), *env.flags, "--conf", str(CONF), "--bin", str(_bin(env)),
                           "--workspace", str(env.ws), "--mode", mode],
                          capture_output=True, text=True, env=env.environ(), timeout=600)


# -- 1: every key on a jail whose id begins with 0 ---------------------------------------------

def test_every_key_works_on_a_session_whose_id_begins_with_0(jail_env):
    env = jail_env
    proc = press_every_key(env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all worked" in proc.stdout
    # The stop prompt's run-shell marks the row stopped after the session is gone (it first waits
    # up to 2 s for the jail's proxies to leave): the script returns when tmux no longer has it.
    row = wait(lambda: (r := sqlite3.connect(env.store).execute("SELECT id, status FROM sessions").fetchone())
               and r[1] == "stopped" and r, what="the row marked stopped")
    assert row[0].startswith("0")


def test_if_shell_guards_test_for_empty_not_for_true():
    """Every jailed-pane key's guard is `!=` the empty string (a bare `#{@tmuxjail_id}` is false
    for ids beginning with 0 in tmux 3.3a's if-shell -F)."""
    text = CONF.read_text()
    guards = re.findall(r"^    \S if-shell -F '([^']*)'", text, re.MULTILINE)
    assert len(guards) == 3 and set(guards) == {"#{!=:#{@tmuxjail_id},}"}


# -- 9: the indicator survives a long pane title -----------------------------------------------

def test_indicator_survives_a_long_pane_title(ui):
    env, term = ui
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "t", "--detach")
    env.tmux("switch-client", "-c", term.client, "-t", "=t:")
    env.tmux("select-pane", "-t", "=t:", "-T", "a-very-long-title-" * 8)
    wait(lambda: "a-very-long-title" in term.screen().splitlines()[-1], what="the title on the status line")
    wait(lambda: "[isolated:shell]" in term.screen().splitlines()[-1],
         what=f"the indicator beside a long title: {term.screen().splitlines()[-1]!r}")
    # Sourcing the file again adds it no second time, and the length grows once.
    assert env.tmux("show", "-gv", "status-right-length").strip() == "80"
    env.tmux("source-file", str(CONF))
    assert env.tmux("show", "-gv", "status-right-length").strip() == "80"
    assert env.tmux("show", "-gv", "status-right").count("#{E:@tmuxjail-status}") == 1


# -- 10: a refusal from a menu says why and what to do -----------------------------------------

def test_refused_resume_from_the_menu_shows_reason_and_fix(ui):
    env, term = ui
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "old", "--detach")
    # A live session is reattached whatever changed (nothing is launched): only a relaunch is
    # refused, so the jailed shell ends first.
    env.tmux("send-keys", "-t", "=old:", "exit", "Enter")
    wait(lambda: env.tmux("display", "-p", "-t", "=old:", "#{pane_dead}").strip() == "1", what="the shell to end")
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('allowed_modes = ["compatibility"]\n')
    term.send("C-b", "J", "r")
    screen = wait(lambda: term.screen() if "tmuxjail: resume" in term.screen() else None, what="the resume menu")
    assert f"server: {env.tmux('display', '-p', '#{socket_path}').strip()}" in screen
    line = next(ln for ln in screen.splitlines() if "old" in ln and "shell/isolated" in ln)
    term.send(re.search(r"\((\w)\)", line).group(1))
    screen = wait(lambda: term.screen() if "tmuxjail: refused" in term.screen() else None,
                  what=f"the refusal: {term.screen()}")
    assert "policy changed" in screen and "fix:" in screen and "returned" not in screen


def test_resume_menu_lists_only_this_servers_sessions(ui):
    env, term = ui
    other = f"{env.socket}-other"
    try:
        env.run("-L", other, "start", "shell", "--mode", "compatibility", "--workspace", str(env.ws),
                "--name", "elsewhere", "--detach", check=True)
        env.json("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--name", "here", "--detach")
        term.send("C-b", "J", "r")
        screen = wait(lambda: term.screen() if "tmuxjail: resume" in term.screen() else None, what="the resume menu")
        assert "here" in screen and "elsewhere" not in screen
    finally:
        subprocess.run(["tmux", "-L", other, "kill-server"], capture_output=True, env=env.environ())


# -- 11: prefix J ? describes the keys ---------------------------------------------------------

def test_question_mark_lists_each_key_with_its_description(env):
    env.tmux("-f", "/dev/null", "new-session", "-d", "-s", "x")
    env.tmux("source-file", str(CONF))
    described = dict(ln.split(" ", 1) for ln in env.tmux("list-keys", "-N", "-T", "tmuxjail").splitlines())
    assert set(described) == set("srlSpx?")
    assert all(len(d) > 10 for d in described.values())
    assert "list-keys -N -T tmuxjail" in env.tmux("list-keys", "-T", "tmuxjail", "?")


# -- 22: the waiting alert reaches the client, whichever session it looks at --------------------

def test_waiting_alert_shows_on_the_client(ui):
    env, term = ui
    env.tmux("set", "-g", "@tmuxjail-waiting-alert", "2")
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "ag", "--detach")
    wait(lambda: "tmuxjail: ag:0 waits for you" in term.screen(), what=f"the alert on the client: {term.screen()}")
