"""Verified mode end to end on the real jail: approvals bound to what runs, preflight for
scheduled runs, restriction files that only narrow. Each maps to an acceptance criterion of the
seed (see the README's verified-mode section)."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytestmark = pytest.mark.integration


def rows(env):
    if not env.store.exists():
        return 0
    return sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0]


def start(env, *extra, name="v"):
    return env.run("start", "codex", "--mode", "verified", "--workspace", str(env.ws), "--name", name,
                   "--detach", "--non-interactive", "--json", *extra)


def upgrade(env):
    with open(env.bin / "codex", "a") as f:
        f.write("# 0.172.0\n")


def test_approve_start_upgrade_refused_reapprove_start(jail_env):
    env = jail_env
    proc = start(env)
    assert proc.returncode == 4 and rows(env) == 0  # nothing approved: nothing runs
    env.run("approve", "codex", "--yes", check=True)
    info = json.loads(start(env).stdout)
    assert info["status"] == "running"
    shown = env.json("show", "v")
    assert shown["approval"]["capabilities"] == sorted(shown["policy"]["capabilities"])
    assert shown["identity"]["sha256"] == shown["approval"]["executable"]["sha256"]
    assert {"id": "codex.state", "label": "Use your existing Codex login and conversation history"} in shown["capabilities"]
    assert shown["profile"]["version"] == _codex_version() and shown["mode"] == "verified"

    upgrade(env)  # an upgrade is detected before anything runs
    env.kill()
    proc = env.run("resume", "v", "--detach", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["executable"]
    proc = start(env, name="v2")
    assert proc.returncode == 4
    err = json.loads(proc.stdout)
    assert any("executable changed" in m for m in err["missing"]) and err["fix"] == "tmuxjail approve codex"
    assert env.tmux("ls", check=False) == ""  # nothing started

    env.run("approve", "codex", "--yes", check=True)
    assert json.loads(start(env, name="v2").stdout)["status"] == "running"


def test_added_capability_needs_its_own_approval(jail_env):
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    proc = start(env, "--capability", "git-identity")
    assert proc.returncode == 4
    assert "capability not approved: Use Git identity (git-identity)" in proc.stdout
    assert "tmuxjail approve codex --capability git-identity" in proc.stderr
    env.run("approve", "codex", "--capability", "git-identity", "--yes", check=True)
    assert start(env, "--capability", "git-identity").returncode == 0


def test_revoked_approval_refuses_resume(jail_env):
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    assert start(env).returncode == 0
    env.run("revoke", "codex", check=True)
    # list --check runs the same approval check as resume: it shows the refusal before it happens.
    row = env.json("list", "--check")[0]
    assert (row["status"], row["reasons"], row["pane_status"]) == ("mismatch", ["capabilities"], "running")
    env.kill()
    proc = env.run("resume", "v", "--detach", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["capabilities"]


def test_preflight_never_prompts_or_starts(jail_env):
    env = jail_env
    args = ("preflight", "codex", "--mode", "verified", "--workspace", str(env.ws), "--json")
    proc = env.run(*args)
    assert proc.returncode == 4 and json.loads(proc.stdout)["missing"] == ["no approval for Codex CLI"]
    env.run("approve", "codex", "--yes", check=True)
    ok = env.json(*args[:-1])
    assert ok["ok"] and ok["fingerprint"].startswith("sha256:")
    assert rows(env) == 0 and env.tmux("ls", check=False) == ""
    # the fingerprint preflight promised is the one the run gets
    assert json.loads(start(env).stdout)["fingerprint"] == ok["fingerprint"]
    (env.config_dir / "config.toml").write_text('allowed_modes = ["isolated"]\n')
    assert env.run(*args).returncode == 4
    assert env.run("preflight", "codex", "--workspace", "/nonexistent").returncode == 2


def test_approve_without_a_terminal_needs_yes(jail_env):
    env = jail_env
    proc = env.run("approve", "codex")
    assert proc.returncode == 2 and "--yes" in proc.stderr
    assert env.json("approvals") == []


def test_restriction_file_only_narrows(jail_env):
    env = jail_env
    env.run("approve", "codex", "--capability", "git-identity", "--yes", check=True)
    rfile = env.root / "r.toml"
    rfile.write_text('env_names = ["TERM"]\ncapabilities = ["git-identity"]\n')
    info = json.loads(start(env, "--restrict", str(rfile)).stdout)
    assert env.json("show", "v")["policy"]["env_names"] == ["TERM"]
    env.kill()
    assert env.json("resume", "v", "--detach")["fingerprint"] == info["fingerprint"]  # recorded, not re-read
    rfile.write_text('env_names = ["LD_PRELOAD"]\n')
    proc = start(env, "--restrict", str(rfile), name="w")
    assert proc.returncode == 2 and "env_names" in proc.stderr
    rfile.write_text('workspaces = ["/srv"]\n')
    assert start(env, "--restrict", str(rfile), name="w").returncode == 4
    rfile.write_text('mode = "compatibility"\n')
    assert start(env, "--restrict", str(rfile), name="w").returncode == 2


def test_workspace_restriction_file_is_never_read_implicitly(jail_env):
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    for name in ("tmuxjail.toml", ".tmuxjail.toml", "restrict.toml", "config.toml"):
        (env.ws / name).write_text('allowed_modes = ["compatibility"]\nenv_names = ["LD_PRELOAD"]\n')
    assert start(env).returncode == 0


def test_accept_changes_needs_a_terminal(jail_env):
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    assert start(env).returncode == 0
    upgrade(env)
    proc = env.run("resume", "v", "--accept-changes", "--detach")
    assert proc.returncode == 2 and "terminal" in proc.stderr


def _codex_version() -> str:
    import tomllib
    from importlib import resources

    # the shipped profile's version (it is bumped whenever the profile changes, e.g. on certification)
    return tomllib.loads(resources.files("tmuxjail.profile_data").joinpath("codex.toml").read_text())["profile_version"]


def test_profiles_commands(env):
    assert env.run("profiles", "check").returncode == 0
    data = env.json("profiles", "show", "codex")
    assert data["profile_version"] == _codex_version() and "git-identity" in data["optional"]
    assert "~/.codex" in env.run("profiles", "show", "codex", "--details").stdout
    assert env.run("profiles", "show", "nosuch").returncode == 2


def _on_a_terminal(env, *args, answer="y\n", timeout=30):
    """Run tmuxjail with a real pseudo-terminal as stdin/stdout, answering its question."""
    import os
    import pty
    import subprocess
    import sys
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "tmuxjail", "-L", env.socket, *args], cwd=env.ws,
                            env=env.environ(), stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out, answered, deadline = b"", False, time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            import select

            if select.select([master], [], [], 0.1)[0]:
                out += os.read(master, 4096)
        except OSError:
            break
        if not answered and b"[y/N]" in out:
            os.write(master, answer.encode())
            answered = True
    proc.wait(timeout=5)
    try:
        while select.select([master], [], [], 0.1)[0]:
            out += os.read(master, 4096)
    except OSError:
        pass
    os.close(master)
    return proc.returncode, out.decode(errors="replace")


def test_accept_changes_on_a_terminal_after_the_new_approval(jail_env):
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    old = json.loads(start(env).stdout)["fingerprint"]
    upgrade(env)
    code, out = _on_a_terminal(env, "resume", "v", "--accept-changes", "--detach")
    assert code == 3 and "approval" in out  # the new approval must exist first
    code, out = _on_a_terminal(env, "approve", "codex")
    assert code == 0 and "Use Codex CLI" in out and "approved" in out
    code, out = _on_a_terminal(env, "resume", "v", "--accept-changes", "--detach")
    assert code == 0, out
    new = env.json("show", "v")
    assert new["fingerprint"] != old and new["status"] == "running"
    events = sqlite3.connect(env.store).execute(
        "SELECT data FROM events WHERE kind='accept-changes'").fetchall()
    assert len(events) == 1 and json.loads(events[0][0])["old"] == old


def test_interactive_start_asks_and_records_the_approval(jail_env):
    env = jail_env
    code, out = _on_a_terminal(env, "start", "codex", "--mode", "verified", "--workspace", str(env.ws),
                               "--name", "i", "--detach", answer="n\n")
    assert code == 4 and rows(env) == 0 and env.json("approvals") == []
    code, out = _on_a_terminal(env, "start", "codex", "--mode", "verified", "--workspace", str(env.ws),
                               "--name", "i", "--detach")
    assert code == 0, out
    assert len(env.json("approvals")) == 1
