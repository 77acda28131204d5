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


def _servers(env):
    """Two tmux servers: A (env's own -L socket) and B (another -L socket), both cleaned up."""
    other = f"{env.socket}-b"
    return ["-L", env.socket], ["-L", other]


def _sessions_on(env, flags) -> list[str]:
    import subprocess

    proc = subprocess.run(["tmux", *flags, "list-sessions", "-F", "#{session_name}"], capture_output=True,
                          text=True, env=env.environ())
    return proc.stdout.split()


def test_a_session_is_acted_on_where_it_runs(jail_env):
    env = jail_env
    a, b = _servers(env)
    try:
        env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
        env.flags = b
        env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.bin), "--name", "b", "--detach")
        # From B: list shows both, with their servers; --server filters.
        rows = {r["name"]: r for r in env.json("list")}
        assert rows["a"]["status"] == rows["b"]["status"] == "running"
        assert rows["a"]["server"] == env.socket and rows["b"]["server"] == b[1]
        table = env.run("list", "--color", "never", check=True).stdout
        assert "SERVER" in table.splitlines()[0] and env.socket in table
        assert [r["name"] for r in env.json("list", "--server", env.socket)] == ["a"]
        assert [r["name"] for r in env.json("list", "--server", rows["b"]["tmux_socket"])] == ["b"]
        # From B, resume of a live session on A reattaches there: no second copy on B.
        got = env.json("resume", "a", "--detach")
        assert got["status"] == "running" and got["tmux_pane"] == rows["a"]["tmux_pane"]
        assert _sessions_on(env, b) == ["b"] and _sessions_on(env, a) == ["a"]
        assert env.json("show", "a")["status"] == "running"
        shell = env.json("shell", "a", "--detach")
        assert env.tmux("list-panes", "-s", "-t", "=a", "-F", "#{pane_id}", check=False) == ""  # not on B
        env.flags = a
        assert shell["shell_pane"] in env.tmux("list-panes", "-s", "-t", "=a", "-F", "#{pane_id}").split()
        # From B, stop kills it on A.
        env.flags = b
        assert env.run("stop", "a").returncode == 0
        assert _sessions_on(env, a) == [] and _sessions_on(env, b) == ["b"]
        # The agent of a dead session is relaunched on its own server, not on the caller's.
        env.flags = a
        env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.outside), "--name", "c", "--detach")
        env.tmux("kill-session", "-t", "=c")
        env.flags = b
        assert env.json("resume", "c", "--detach")["status"] == "running"
        assert "c" in _sessions_on(env, a) and "c" not in _sessions_on(env, b)
    finally:
        import subprocess

        subprocess.run(["tmux", *b, "kill-server"], capture_output=True, env=env.environ())


def test_a_server_that_cannot_be_reached_is_refused_with_the_command(jail_env, tmp_path):
    import socket
    import threading

    env = jail_env
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
    fake = tmp_path / "fake.sock"  # a socket whose "server" hangs up on every client
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(fake))
    srv.listen(8)

    def hang_up():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.close()

    threading.Thread(target=hang_up, daemon=True).start()
    db = sqlite3.connect(env.store)
    db.execute("UPDATE sessions SET tmux_socket=?", (str(fake),))
    db.commit()
    try:
        for cmd in ("resume", "stop"):
            proc = env.run(cmd, "a")
            one_line_error(proc, 1)
            assert f"tmux -S {fake} attach -t =a" in proc.stderr, proc.stderr
        assert db.execute("SELECT status FROM sessions").fetchone()[0] == "running"  # not "stopped"
    finally:
        srv.close()
