"""A launch spec carries credential values (read once by the in-pane launcher, then deleted).
Whatever goes wrong before the pane reads it, no value may stay behind in anything of tmuxjail's:
its config, state (spool, store, log), data and cache dirs, or the tmux server's environment."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
SECRET = "sk-test-SECRET-c0mpat"
CRED = {"OPENAI_API_KEY": SECRET}  # declared by the codex profile: passed into isolated mode


def leftovers(env) -> list[str]:
    found = []
    for top in (".config", ".local/state", ".local/share", ".cache"):
        for dirpath, _, files in os.walk(env.home / top):
            for f in files:
                p = Path(dirpath, f)
                try:
                    if SECRET.encode() in p.read_bytes():
                        found.append(str(p))
                except OSError:
                    pass
    server_env = env.tmux("show-environment", "-g", check=False)
    if SECRET in server_env:
        found.append("tmux server environment")
    return found


def _start(env, *extra):
    return env.run("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "c",
                   "--detach", *extra, env_extra=CRED)


def _hook(env, command: str) -> None:
    """A tmux server of the test's own, on which every new session runs `command` at once."""
    deadline = time.monotonic() + 10
    while True:
        try:
            env.tmux("new-session", "-d", "-s", "keep")
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # the previous server may still be on its way out
    env.tmux("set-hook", "-g", "session-created", command)


def test_server_killed_during_start_leaves_no_secret(jail_env):
    env = jail_env
    _hook(env, "kill-server")  # the pane dies before its launcher can read the spec
    proc = _start(env)
    assert proc.returncode != 0, proc.stdout
    assert leftovers(env) == []


def test_pane_that_never_opens_leaves_no_secret(jail_env, tmp_path):
    env = jail_env
    long = tmp_path / ("d" * 100)  # too long for a unix socket path: tmux cannot start a server
    long.mkdir()
    env.vars["TMUX_TMPDIR"] = str(long)
    proc = _start(env)
    assert proc.returncode != 0, proc.stdout
    assert leftovers(env) == []


def test_jail_that_never_comes_up_leaves_no_secret(jail_env):
    env = jail_env
    # The pane's launcher is replaced before it can read its spec; the pane stays alive.
    _hook(env, "respawn-pane -k 'sleep 600'")
    proc = _start(env)
    assert proc.returncode == 5, proc.stderr
    assert "did not come up" in proc.stderr
    assert leftovers(env) == []


def test_failed_resume_leaves_no_secret(jail_env):
    env = jail_env
    assert _start(env).returncode == 0
    env.kill()
    _hook(env, "kill-server")
    proc = env.run("resume", "c", "--detach", env_extra=CRED)
    assert proc.returncode != 0, proc.stdout
    assert leftovers(env) == []


def test_refused_resume_leaves_no_secret(jail_env):
    env = jail_env
    assert _start(env).returncode == 0
    env.kill()
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('allowed_modes = ["compatibility"]\n')
    proc = env.run("resume", "c", "--detach", env_extra=CRED)
    assert proc.returncode == 3, proc.stderr
    assert leftovers(env) == []


def test_stale_specs_are_swept_at_the_next_start(jail_env):
    """A tmuxjail killed between writing a spec and its pane starting leaves the spec: the next
    start removes every spec older than the start wait."""
    env = jail_env
    spool = env.state_dir / "spool"
    spool.mkdir(parents=True, mode=0o700)
    stale = spool / "0123-dead.json"
    stale.write_text(f'{{"env": {{"OPENAI_API_KEY": "{SECRET}"}}}}')
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = spool / "4567-live.json"  # a concurrent start's spec, not yet read: kept
    fresh.write_text("{}")
    assert _start(env).returncode == 0
    assert not stale.exists()
    assert fresh.exists()
    assert leftovers(env) == []
