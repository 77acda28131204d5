"""Compatibility mode shares the host's filesystem and its user: these attacks come from inside a
real compatibility jail and go for what tmuxjail or tmux will act on later, outside the jail:
tmux servers (the fresh socket dir of a first run, servers anywhere the user started them) and
tmuxjail's own install, config, state and spool."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_escapes import Jail, furnish

pytestmark = pytest.mark.adversarial


def _reach(env, sock: str, tag: str, tmpdir: str | None = None, name: str | None = None) -> str:
    """Shell lines that try to run a command on the tmux server at `sock`, three ways."""
    touch = f"touch {env.sentinel}.{tag}"
    lines = [
        f"tmux -S {sock} new-window '{touch}' 2>/dev/null && echo {tag}_DASH_S",
        f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('{tag}_CONNECT')\" 2>/dev/null",
    ]
    if tmpdir:
        lines.append(f"TMUX_TMPDIR={tmpdir} tmux -L {name} new-window '{touch}' 2>/dev/null && echo {tag}_DASH_L")
    return "\n".join(lines) + "\n"


def test_first_run_socket_dir_is_masked(jail_env, tmp_path):
    """A fresh boot: tmux's socket dir does not exist when tmuxjail builds the jail's argv (it
    starts the server itself, afterwards). The jail must still not reach that server."""
    env = jail_env
    tmpdir = tmp_path / "fresh-tmux-tmpdir"
    tmpdir.mkdir()
    env.vars["TMUX_TMPDIR"] = str(tmpdir)  # for tmuxjail and for env.tmux: a dir tmux never used
    env = furnish(env)
    sockdir = tmpdir / f"tmux-{os.getuid()}"
    assert not sockdir.exists()
    try:
        jail = Jail(env, "compatibility")
        sock = env.tmux("display-message", "-p", "#{socket_path}").strip()
        assert sock == str(sockdir / env.socket)
        out = jail.sh(_reach(env, sock, "FRESH", str(tmpdir), env.socket) + "echo end\n")
        assert out.split() == ["end"], out
        assert not Path(f"{env.sentinel}.FRESH").exists()
        assert sockdir.is_dir() and (sockdir.stat().st_mode & 0o777) == 0o700
        env.unchanged()
    finally:
        env.tmux("kill-server", check=False)  # env.kill() would address the default dir
        shutil.rmtree(sockdir, ignore_errors=True)


def test_socket_dir_symlink_is_not_followed(jail_env, tmp_path):
    """A symlink planted where tmux's dir would be is neither followed nor created through."""
    env = jail_env
    tmpdir, elsewhere = tmp_path / "tt", tmp_path / "elsewhere"
    tmpdir.mkdir()
    elsewhere.mkdir()
    (tmpdir / f"tmux-{os.getuid()}").symlink_to(elsewhere)
    from tmuxjail.host import ensure_socket_dir

    assert ensure_socket_dir(str(tmpdir / f"tmux-{os.getuid()}")) is None
    assert list(elsewhere.iterdir()) == []


@pytest.fixture
def servers(jail_env, tmp_path):
    """tmux servers of this user that tmuxjail is not told about: one with -S at an arbitrary
    path, one in a runtime dir through TMUX_TMPDIR (as with TMUX_TMPDIR=/run/user/UID), one with
    -L in the default dir."""
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    made = []

    def serve(*args, extra_env=None):
        e = {k: v for k, v in jail_env.environ().items() if k != "TMUX_TMPDIR"}
        e.update(extra_env or {})
        subprocess.run(["tmux", *args, "new-session", "-d", "sleep 600"], check=True, env=e)
        made.append((args, e))

    anywhere = tmp_path / "any" / "where.sock"
    anywhere.parent.mkdir()
    serve("-S", str(anywhere))
    name = f"tjother-{os.getpid()}"
    serve("-L", name, extra_env={"TMUX_TMPDIR": str(runtime)})
    default = f"tjdefault-{os.getpid()}"
    serve("-L", default)
    yield {"anywhere": str(anywhere), "runtime": str(runtime / f"tmux-{os.getuid()}" / name),
           "runtime_dir": str(runtime), "runtime_name": name,
           "default": f"/tmp/tmux-{os.getuid()}/{default}"}
    for args, e in made:
        subprocess.run(["tmux", *args, "kill-server"], env=e, capture_output=True)
    # No stale socket files left for other tests' scans.
    for sock in (anywhere, runtime / f"tmux-{os.getuid()}" / name, Path(f"/tmp/tmux-{os.getuid()}/{default}")):
        sock.unlink(missing_ok=True)


def test_every_running_tmux_server_is_hidden(servers, jail_env):
    env = furnish(jail_env)
    for sock in (servers["anywhere"], servers["runtime"], servers["default"]):
        assert os.path.exists(sock), sock
    jail = Jail(env, "compatibility")
    out = jail.sh(
        _reach(env, servers["anywhere"], "ANYWHERE")
        + _reach(env, servers["runtime"], "RUNTIME", servers["runtime_dir"], servers["runtime_name"])
        + _reach(env, servers["default"], "DEFAULT")
        + "echo end\n")
    assert out.split() == ["end"], out
    for tag in ("ANYWHERE", "RUNTIME", "DEFAULT"):
        assert not Path(f"{env.sentinel}.{tag}").exists()
    env.unchanged()


def test_a_jail_cannot_unmask_a_server_by_closing_its_directory(jail_env, tmp_path):
    """Found by a red-team run: jail A made the directory of the user's `-S` server unreadable
    (chmod 000), so the next start judged the server unreachable and left it unmasked; jail B
    opened the directory again and drove the server. Our own servers are masked whatever their
    directory's mode, and a mask bwrap cannot mount fails the start, closed."""
    env = furnish(jail_env)
    socks = env.home / "socks"
    socks.mkdir(mode=0o700)
    sock = socks / "main.sock"
    e = {k: v for k, v in env.environ().items() if k != "TMUX_TMPDIR"}
    subprocess.run(["tmux", "-S", str(sock), "new-session", "-d", "sleep 600"], check=True, env=e)
    try:
        a = Jail(env, "compatibility")
        a.sh(f"chmod 000 {socks}; echo done")
        proc = env.run("start", "shell", "--mode", "compatibility", "--name", "b", "--detach")
        if proc.returncode == 0:  # started: then the server must be masked in b
            b = Jail.__new__(Jail)
            b.env, b.mode, b.name, b.n, b.ws = env, "compatibility", "b", 50, a.ws
            out = b.sh(f"chmod 700 {socks}; " + _reach(env, str(sock), "CLOSED") + "echo end\n")
            assert out.split() == ["end"], out
            assert not Path(f"{env.sentinel}.CLOSED").exists()
        else:
            assert proc.returncode == 5, proc.stderr  # refused, closed
    finally:
        os.chmod(socks, 0o700)
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], env=e, capture_output=True)
        sock.unlink(missing_ok=True)
