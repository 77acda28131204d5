"""Compatibility mode shares the host's filesystem and its user: these attacks come from inside a
real compatibility jail and go for what tmuxjail or tmux will act on later, outside the jail:
tmux servers (the fresh socket dir of a first run, servers anywhere the user started them) and
tmuxjail's own install, config, state and spool."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import furnish
from test_escapes import Jail

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
    # Short, under /tmp: a unix socket path has 107 bytes at most, and pytest's tmp_path for a
    # long user name (the newcomer tier's) leaves too few.
    tmpdir = Path(tempfile.mkdtemp(prefix="tjf", dir="/tmp"))
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
        shutil.rmtree(tmpdir, ignore_errors=True)


def test_socket_dir_symlink_is_not_followed(jail_env, tmp_path):
    """A symlink planted where tmux's dir would be is neither followed nor created through."""
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


def test_compatibility_cannot_move_or_rewrite_tmuxjail_state_config_or_install(jail_env):
    """13.5: renaming an ancestor of a mask moved the mask along and left a fresh, unmasked
    state dir (spool) or config at the path tmuxjail uses next; an install inside a writable path
    let the agent rewrite the code the launcher runs outside every jail."""
    import tmuxjail

    env = furnish(jail_env)
    pkg = Path(tmuxjail.__file__).parent
    home = env.home
    jail = Jail(env, "compatibility")
    out = jail.sh(f"""
        mv {home}/.local {home}/.local-moved 2>/dev/null && echo MOVED_LOCAL
        mv {home}/.local/state {home}/.local/state-moved 2>/dev/null && echo MOVED_STATE
        mv {home}/.config {home}/.config-moved 2>/dev/null && echo MOVED_CONFIG
        mv {home} {home}-moved 2>/dev/null && echo MOVED_HOME
        mkdir -p {env.state_dir}/spool 2>/dev/null && touch {env.state_dir}/spool/planted 2>/dev/null
        mkdir -p {env.config_dir} 2>/dev/null
        echo 'allowed_modes = ["compatibility"]' > {env.config_dir}/config.toml 2>/dev/null && echo CONFIG_WRITTEN
        python3 -c "open('{pkg}/launch.py', 'a')" 2>/dev/null && echo INSTALL_WRITABLE
        touch {pkg}/planted.py 2>/dev/null && rm -f {pkg}/planted.py && echo INSTALL_PLANT
        echo end
    """)
    assert out.split() == ["end"], out
    for p in (home / ".local" / "state", home / ".config" / "tmuxjail", env.store):
        assert p.exists(), p
    assert not (env.state_dir / "spool" / "planted").exists()
    assert not (env.config_dir / "config.toml").exists()
    env.unchanged()


def _launch(env, spec: dict, name: str):
    import json as _json

    from tmuxjail.pane.command import launcher as pane_command

    path = env.state_dir / "spool" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    spec = dict(spec, status_file=spec.get("status_file", str(path)[:-5] + ".status"))
    path.write_text(_json.dumps(spec))
    path.chmod(0o600)
    return subprocess.run(pane_command(sys.executable, spec["fingerprint"], str(path)), env=env.environ(),
                          cwd=env.ws, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def _drop_first_mask(call):
    """The first mask swapped for a harmless option of the same length (so that only a check of
    the bwrap call itself can tell)."""
    setup = [list(e) for e in call["setup"]]
    i = next(i for i, e in enumerate(setup) if e[0] == "--tmpfs")
    setup[i] = ["--chdir", "/"]
    return dict(call, setup=setup)


TAMPER = {
    "unjailed": lambda s, cli: dict(s, argv=cli, sandboxed=False),
    "no-seccomp": lambda s, cli: dict(s, sandboxed=False),  # bwrap run without the filter's fd
    "other-program": lambda s, cli: dict(s, argv=["/bin/sh", *cli[1:]]),
    "mask-dropped": lambda s, cli: dict(s, call=_drop_first_mask(s["call"])),
    "bwrap-option-changed": lambda s, cli: dict(s, call=dict(s["call"], setup=[
        e if e != ["--unshare-pid"] else ["--share-net"] for e in s["call"]["setup"]])),
    "executable": lambda s, cli: dict(s, argv=["/usr/bin/env", *cli]),
    "env-tmux": lambda s, cli: dict(s, env=dict(s["env"], TMUX="/tmp/tmux-0/default,1,0")),
    "env-changed": lambda s, cli: dict(s, env=dict(s["env"], HOME="/")),
    "landlock-off": lambda s, cli: dict(s, landlock_scope=False),
    "status-file": lambda s, cli: dict(s, status_file="/nonexistent-dir/elsewhere.status"),
}


@pytest.mark.parametrize("mode", ["compatibility", "isolated"])
def test_launcher_runs_only_what_follows_from_the_policy(jail_env, mode):
    """13.5b: whoever rewrites a spec in the spool chooses argv, environment and side settings,
    which the fingerprint does not cover. The launcher rebuilds them from the fingerprinted policy
    and refuses (exit 3) any other; an untouched spec still runs."""
    import sqlite3

    from tmuxjail.sandbox import landlock

    env = jail_env
    args = ("start", "shell", "--mode", mode, "--workspace", str(env.ws))
    dry = env.json(*args, "--dry-run")
    env.run(*args, "--name", "j", "--detach", check=True)
    sid, fp = sqlite3.connect(env.store).execute("SELECT id, fingerprint FROM sessions WHERE name='j'").fetchone()
    assert fp == dry["fingerprint"]
    cli = [*dry["cli_argv"], "-c", "echo ok > ./launched"]
    pol = dry["policy"]
    spec = {
        "session_id": sid, "fingerprint": fp, "policy": pol, "argv": cli, "call": dry["sandbox_call"],
        "env": dict(pol["env_set"]), "store": str(env.store), "machine": os.uname().machine,
        "sandboxed": True, "landlock_scope": mode != "compatibility" and landlock.abi() >= landlock.MIN_ABI,
        "layout": dry["host_layout"],
    }
    for kind, tamper in TAMPER.items():
        if kind in ("env-changed", "landlock-off") and mode == "compatibility":
            continue  # compatibility inherits the caller's environment and has no Landlock scope
        proc = _launch(env, tamper(spec, cli), f"{sid}-{kind}")
        assert proc.returncode == 3 and "tampered" in proc.stderr, (kind, proc.returncode, proc.stderr)
        if kind == "executable":  # refused by its own check, not by a neighbour that also says "tampered"
            assert "spec's executable" in proc.stderr, proc.stderr
        assert not (env.ws / "launched").exists(), kind
    proc = _launch(env, spec, f"{sid}-untouched")
    assert proc.returncode == 0, proc.stderr
    assert (env.ws / "launched").read_text() == "ok\n"


def test_doctor_says_when_the_install_is_writable(jail_env):
    """The test venv is writable by whoever runs the suite, as install.sh's venv in the home is."""
    import json as _json

    import tmuxjail

    data = _json.loads(jail_env.run("doctor", "--json").stdout)
    check = next(c for c in data["checks"] if c["check"] == "install")
    assert not check["ok"] and not check["required"]
    assert os.path.realpath(Path(tmuxjail.__file__).parent) in check["detail"]
    assert ("strict mode" if os.getuid() == 0 else "/opt/tmuxjail") in check["fix"]
