"""Failure is visible, never silent: a jail that cannot be set up is reported (exit 5, recorded as
failed, a dead pane with bwrap's reason, never a shell), and running without bubblewrap needs the
operator's explicit opt-in and is listed as such. These change the host for a moment, so root only."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.getuid() != 0, reason="needs root to change the host for a moment")]


def test_sandbox_setup_failure_exits_5_and_leaves_a_dead_pane(jail_env):
    """A real setup failure: the workspace exists for the caller but not for the tmux server, so
    the launcher in the pane cannot open it to bind it (before bwrap would say the same)."""
    env = jail_env
    env.tmux("new-session", "-d", "-s", "other", "sleep 600")  # the server lives in the host namespace
    hidden = env.root / "only-in-caller-ns"
    hidden.mkdir()
    cmd = (f"mount -t tmpfs none {hidden} && mkdir {hidden}/ws && "
           f"{sys.executable} -P -m tmuxjail -L {env.socket} start shell --mode isolated "
           f"--workspace {hidden}/ws --name f --detach --json")
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd], env=env.environ(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 5, proc.stderr
    gone = "is gone since the policy was computed"
    assert gone in proc.stderr and "Traceback" not in proc.stderr
    status, failure = sqlite3.connect(env.store).execute("SELECT status, failure FROM sessions").fetchone()
    assert status == "failed" and gone in failure
    assert env.tmux("list-panes", "-t", "=f:", "-F", "#{pane_dead}").strip() == "1"  # dead, not a shell
    assert gone in env.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "=f:")
    assert [r["status"] for r in env.json("list")] == ["failed"]


def _without_bwrap(env, *args):
    """Run tmuxjail (and the tmux server it starts) in a mount namespace where bwrap is gone."""
    cmd = " ".join(["mount --bind /dev/null /usr/bin/bwrap &&", sys.executable, "-P", "-m", "tmuxjail", "-L",
                    env.socket, *args])
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd], cwd=env.ws,
                          env=env.environ(), capture_output=True, text=True, timeout=60)


def test_without_bubblewrap_every_mode_refuses_unless_operator_opts_in(jail_env):
    env = jail_env
    for mode in ("compatibility", "isolated", "verified"):
        proc = _without_bwrap(env, "start", "shell", "--mode", mode, "--detach")
        assert proc.returncode == 5 and "bubblewrap" in proc.stderr, (mode, proc.stderr)
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("allow_unguarded_compatibility = true\n")
    proc = _without_bwrap(env, "start", "shell", "--mode", "isolated", "--detach")
    assert proc.returncode == 5  # a strict mode never falls back
    proc = _without_bwrap(env, "start", "shell", "--mode", "compatibility", "--name", "u", "--detach", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["mode"] == "compatibility-unguarded" and info["status"] == "running"
    assert env.tmux("display-message", "-p", "-t", "=u:", "#{@tmuxjail_mode}").strip() == "compatibility-unguarded"
