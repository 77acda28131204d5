"""The everyday path, as a newcomer meets it (issue 12): tmux's default server on a fresh account,
a non-UTF-8 locale, other tmux servers, odd homes, damaged stores, a server killed mid-start.
Most tests here use the default server (no -L) and LC_ALL=C, unlike the rest of the suite."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def wait(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def one_line_error(proc, code=None):
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("tmuxjail: "), proc.stderr
    assert proc.returncode != 0 and (code is None or proc.returncode == code), (proc.returncode, proc.stderr)


@pytest.fixture
def newcomer(jail_env):
    """The default tmux server, no tmux-UID directory yet, LC_ALL=C."""
    jail_env.use_default_server("C")
    assert not Path(jail_env.default_socket).parent.exists()
    return jail_env


def test_default_server_on_a_fresh_account_in_the_c_locale(newcomer):
    env = newcomer
    proc = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "first", "--detach")
    assert proc.returncode == 0, proc.stderr
    assert Path(env.default_socket).is_socket()  # tmux made its directory: we did not pass -S
    rows = env.json("list")
    assert [(r["name"], r["status"]) for r in rows] == [("first", "running")]
    assert rows[0]["tmux_socket"] == env.default_socket
    # A live session is reattached, never started twice ("duplicate session" before the fix).
    again = env.json("resume", "first", "--detach")
    assert again["status"] == "running" and again["tmux_pane"] == rows[0]["tmux_pane"]
    assert env.tmux("list-sessions", "-F", "#{session_name}").split() == ["first"]


def test_c_locale_with_a_named_server(jail_env):
    env = jail_env
    env.vars.pop("LANG")
    env.vars["LC_ALL"] = "C"
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "c", "--detach")
    assert [r["status"] for r in env.json("list")] == ["running"]
    assert "running" in env.run("list", check=True).stdout


def test_tmux_tmpdir_that_does_not_exist_yet(jail_env):
    env = jail_env
    env.vars["TMUX_TMPDIR"] = str(env.root / "not-yet")  # tmux falls back to /tmp
    info = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "t", "--detach")
    real = env.tmux("display-message", "-p", "#{socket_path}").strip()
    assert info["tmux_socket"] == real and real.startswith("/tmp/tmux-")
    assert [r["status"] for r in env.json("list")] == ["running"]


def test_socket_path_in_a_missing_directory_is_one_line(jail_env):
    env = jail_env
    env.flags = ["-S", str(env.root / "missing" / "sock")]
    proc = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--detach")
    one_line_error(proc)
    assert "missing" in proc.stderr


def test_a_jail_killed_by_sigkill_is_not_exited_0(newcomer):
    env = newcomer
    info = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "k", "--detach")
    pid = int(env.tmux("display-message", "-p", "-t", info["tmux_pane"], "#{pane_pid}").strip())
    os.kill(pid, signal.SIGKILL)  # the pane's own process: bwrap, the jail's outermost process
    wait(lambda: env.tmux("display-message", "-p", "-t", info["tmux_pane"], "#{pane_dead}").strip() == "1")
    row = env.json("list")[0]
    assert row["status"] == "killed" and row["signal"] == "SIGKILL", row
    assert "killed(SIGKILL)" in env.run("list", "--color", "never", check=True).stdout
