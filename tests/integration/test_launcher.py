"""The in-pane launcher refuses anything but the one launch it was prepared for."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration


def test_replaying_a_jails_start_command_runs_nothing(jail_env):
    """What tmux-resurrect or a hand-typed copy of pane_start_command would do: the spec was read
    once and deleted, so the replay refuses instead of running anything."""
    env = jail_env
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")
    env.report()
    argv = shlex.split(env.tmux("list-panes", "-t", "=app:", "-F", "#{pane_start_command}").strip())
    env.clear_report()
    pane = env.tmux("new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "=app:", *argv,
                    ";", "set-option", "-w", "-t", "=app:1", "remain-on-exit", "on").strip()
    for _ in range(100):
        if env.tmux("display-message", "-p", "-t", pane, "#{pane_dead}").strip() == "1":
            break
        time.sleep(0.05)
    screen = env.tmux("capture-pane", "-p", "-J", "-S", "-50", "-t", pane)
    assert "is gone" in screen and "refusing" in screen
    statuses = env.tmux("list-panes", "-a", "-F", "#{pane_id} #{pane_dead_status}").split("\n")
    assert f"{pane} 3" in statuses, statuses
    assert not (env.ws / ".standin-codex.report").exists()


def _spec(env, tmp_path):
    """A real spec, captured from a dry run's policy and a stored session."""
    out = env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "s", "--detach")
    row = sqlite3.connect(env.store).execute("SELECT id, policy, fingerprint FROM sessions").fetchone()
    spec = {"session_id": row[0], "fingerprint": row[2], "policy": json.loads(row[1]),
            "argv": ["/bin/echo", "RAN"], "env": {}, "store": str(env.store),
            "status_file": str(tmp_path / "status"), "machine": "x86_64", "sandboxed": True}
    return out, spec


def _launch(env, spec, fp, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o600)
    return subprocess.run([sys.executable, "-E", "-m", "tmuxjail.launch", "--fp", fp, str(path)],
                          capture_output=True, text=True, env=env.environ(), timeout=30)


def test_tampered_policy_is_refused(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    fp = spec["fingerprint"]
    spec["policy"]["workspace_write"] = ["/"]
    proc = _launch(env, spec, fp, tmp_path)
    assert proc.returncode == 3 and "tampered" in proc.stderr and "RAN" not in proc.stdout


def test_fingerprint_the_store_does_not_hold_is_refused(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["policy"]["network"] = "none"  # consistent spec, but not what the store recorded
    from tmuxjail.canon import fingerprint

    fp = spec["fingerprint"] = fingerprint(spec["policy"])
    proc = _launch(env, spec, fp, tmp_path)
    assert proc.returncode == 3 and "store" in proc.stderr and "RAN" not in proc.stdout


def test_stop_will_not_kill_a_tmux_session_that_is_not_ours(jail_env):
    env = jail_env
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")
    env.tmux("kill-session", "-t", "=app")
    env.tmux("new-session", "-d", "-s", "app", "sleep 600")  # someone else's session, same name
    proc = env.run("stop", "app")
    assert proc.returncode == 2 and "not this tmuxjail session" in proc.stderr
    assert env.tmux("has-session", "-t", "=app", check=False) == ""  # still there
