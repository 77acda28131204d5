"""The ssh-agent capability: approved in verified mode, the jail reaches the user's real agent
(signing works, the keys stay outside); without it, or in isolated mode, it reaches nothing."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from test_escapes import Jail

pytestmark = pytest.mark.adversarial


@pytest.fixture
def agent(world):
    if not shutil.which("ssh-agent"):
        pytest.skip("ssh-agent is not installed (Debian: openssh-client)")
    d = world.root / "agent"
    d.mkdir(mode=0o700)
    sock = d / "sock"
    key = world.root / "agentkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tjtest-agent-key", "-f", str(key)], check=True)
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.05"])
        subprocess.run(["ssh-add", "-q", str(key)], env={**os.environ, "SSH_AUTH_SOCK": str(sock)}, check=True)
        yield sock
    finally:
        proc.kill()
        proc.wait()


def _jail(env, mode, name, sock, caps=()):
    jail = Jail.__new__(Jail)
    jail.env, jail.mode, jail.name, jail.n = env, mode, name, 0
    extra = [a for c in caps for a in ("--capability", c)]
    jail.info = env.json("start", "shell", "--mode", mode, "--workspace", str(env.ws), "--name", name,
                         "--detach", *extra, env_extra={"SSH_AUTH_SOCK": str(sock)})
    from pathlib import Path

    jail.ws = Path(jail.info["workspace"])
    return jail


def test_ssh_agent_capability_binds_the_agent_socket(world, agent):
    env = world
    env.run("approve", "shell", "--capability", "ssh-agent", "--yes", check=True)
    jail = _jail(env, "verified", "j", agent, caps=("ssh-agent",))
    out = jail.sh("ssh-add -l 2>&1; rm -f \"$SSH_AUTH_SOCK\" 2>/dev/null && echo REMOVED; echo end")
    assert "tjtest-agent-key" in out and "REMOVED" not in out, out
    assert agent.exists()
    env.unchanged()


@pytest.mark.parametrize("mode", ["isolated", "verified"])
def test_no_agent_without_the_capability(world, agent, mode):
    env = world
    jail = _jail(env, mode, "j", agent)
    out = jail.sh(f"SSH_AUTH_SOCK={agent} ssh-add -l >/dev/null 2>&1 && echo AGENT; echo end")
    assert out.split() == ["end"], out
    env.unchanged()


def test_only_a_safe_agent_socket_is_bound(tmp_path):
    """SSH_AUTH_SOCK comes from the caller's environment: a symlink on the way, a socket in a
    directory others can write, or anything under tmux's socket directory is not bound."""
    import socket

    from tmuxjail.host import agent_socket

    uid = os.getuid()
    d = tmp_path / "a"
    d.mkdir(mode=0o700)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "sock"))
    assert agent_socket(str(d / "sock"), uid) == str(d / "sock")
    (tmp_path / "link").symlink_to(d)
    assert agent_socket(str(tmp_path / "link" / "sock"), uid) is None
    (tmp_path / "up").symlink_to(tmp_path)  # a symlink higher up the path
    assert agent_socket(str(tmp_path / "up" / "a" / "sock"), uid) is None
    assert agent_socket(str(d / "sock"), uid, avoid=(str(d),)) is None
    assert agent_socket(str(d / "nope"), uid) is None and agent_socket("rel/sock", uid) is None
    (d / "file").write_text("x")
    assert agent_socket(str(d / "file"), uid) is None
    d.chmod(0o770)
    assert agent_socket(str(d / "sock"), uid) is None
    s.close()
