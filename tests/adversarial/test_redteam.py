"""Routes a red-team run found around the guards landed for issue 13, each attacked from inside a
real jailed pane: a start-menu item that took a jail's own view of the filesystem for a host path,
a workspace padded until the git walk gave up, a stray ~/package.json that made the whole home a
CLI's install root, and escape sequences in a path that `list` printed to the user's terminal."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import wait_until
from test_escapes import STRICT, Jail
from test_seams import _repo

pytestmark = pytest.mark.adversarial

STANDIN = Path(__file__).parent.parent / "standins" / "standin.sh"


def _sessions(env) -> dict[str, dict]:
    return {r["name"]: r for r in env.json("list", "--all")}


def _cd(env, jail: Jail, path: str) -> None:
    """Move the jailed shell itself (not a subshell) into path, as an agent would."""
    env.tmux("send-keys", "-t", f"={jail.name}:", f"mkdir -p {path} && cd {path} && touch .moved", "Enter")
    wait_until(lambda: env.tmux("display-message", "-p", "-t", f"={jail.name}:", "#{pane_current_path}").strip() == path,
               what=f"the jailed shell to move to {path}")


@pytest.mark.parametrize("mode", STRICT)
def test_start_menu_in_a_jail_starts_in_its_workspace_not_in_its_view(world, mode):
    """The jail's private home sits at your real $HOME path: a directory it makes there and cds
    into is, to tmux, a path of yours. A start-menu item used it as the new jail's workspace, and
    the new jail had the real directory writable."""
    env = world
    secret = env.home / "secret"
    secret.mkdir()
    (secret / "key").write_text("HOSTSECRET")
    jail = Jail(env, mode)
    _cd(env, jail, str(secret))
    pane = env.tmux("display-message", "-p", "-t", "=j:", "#{pane_id}").strip()
    env.run("menu", "_start", "shell", "isolated", "-t", pane, check=True)
    new = [r for n, r in _sessions(env).items() if n != "j"]
    assert len(new) == 1 and new[0]["workspace"] == str(jail.ws), new
    assert new[0]["workspace"] != str(secret)


@pytest.mark.parametrize("where", ["/etc", "/usr/share", "/run"])
def test_a_system_directory_is_never_a_strict_workspace(jail_env, where):
    proc = jail_env.run("start", "shell", "--mode", "isolated", "--workspace", where, "--detach")
    assert proc.returncode == 2, proc.stderr
    assert "system directory" in proc.stderr and "Traceback" not in proc.stderr


def test_padding_the_workspace_with_files_does_not_switch_the_git_walk_off(world):
    """A jail filled the workspace's top level past the walk's entry cap; the next start stopped
    looking below it, and a nested repository's .git was writable in that session."""
    env = world
    _repo(env, env.ws)
    _repo(env, env.ws / "sub")
    jail = Jail(env, "isolated")
    out = jail.sh("""
        python3 -c "import os; [open(f'.pad{i}', 'w').close() for i in range(20001)]"
        echo padded
    """, timeout=60)
    assert "padded" in out
    env.run("stop", "j", check=True)
    info = env.json("start", "shell", "--mode", "isolated", "--name", "k", "--detach")
    protected = info.get("policy", {}).get("protected") or env.json("show", "k")["policy"]["protected"]
    assert f"{jail.ws}/sub/.git" in protected, protected
    second = Jail.__new__(Jail)
    second.env, second.mode, second.name, second.n, second.ws = env, "isolated", "k", 10, jail.ws
    out = second.sh("echo x >> sub/.git/config && echo WROTE; echo end")
    assert out.split() == ["end"], out


def test_a_workspace_past_the_walk_limit_refuses_a_strict_start(world):
    env = world
    _repo(env, env.ws)
    jail = Jail(env, "isolated")
    out = jail.sh("""
        python3 -c "import os; [os.mkdir(f'.d{i}') for i in range(20001)]"
        echo made
    """, timeout=90)
    assert "made" in out
    env.run("stop", "j", check=True)
    proc = env.run("start", "shell", "--mode", "isolated", "--name", "k", "--detach")
    assert proc.returncode == 5, proc.stderr
    assert "too large to find every .git" in proc.stderr


@pytest.mark.parametrize("mode", STRICT)
def test_a_package_json_in_the_home_does_not_bind_the_home_into_the_jail(world, mode):
    """`npm init -y` in ~ (or a compatibility jail) leaves ~/package.json; with the CLI in
    ~/.local/bin the home became the CLI's package root, bound read-only into strict jails."""
    env = world
    bindir = env.home / ".local" / "bin"
    bindir.mkdir(parents=True)
    shutil.copy(STANDIN, bindir / "codex")
    (bindir / "codex").chmod(0o755)
    (env.home / "package.json").write_text(json.dumps({"name": "h", "version": "1.0.0"}))
    path = f"{bindir}:/usr/local/bin:/usr/bin:/bin"
    if mode == "verified":
        env.run("approve", "codex", "--yes", check=True, env_extra={"PATH": path})
    info = env.json("start", "codex", "--mode", mode, "--name", "h", "--detach", env_extra={"PATH": path})
    roots = env.json("show", "h")["policy"]["install_roots"]
    assert all(not str(env.home).startswith(r.rstrip("/") + "/") and r != str(env.home) for r in roots), roots
    assert info["status"] == "running"
    shell = env.json("shell", "h", "--detach", env_extra={"PATH": path})
    probe = Jail.__new__(Jail)
    probe.env, probe.mode, probe.name, probe.n, probe.ws = env, mode, "h", 20, env.ws.resolve()
    probe.target = shell["shell_pane"]
    out = probe.sh(f"cat {env.home}/.ssh/id_ed25519 && echo READ; ls {env.state_dir} 2>/dev/null && echo STATE; echo end")
    assert out.split() == ["end"], out


def test_escape_sequences_in_a_workspace_path_are_refused(jail_env):
    bad = jail_env.ws / "p\x1b]52;c;aGk=\x07\x1b]2;owned\x07"
    bad.mkdir()
    proc = jail_env.run("start", "shell", "--workspace", str(bad), "--detach")
    assert proc.returncode == 2 and "control characters" in proc.stderr
    assert "\x1b" not in proc.stderr  # the message itself prints the name escaped


def test_list_prints_no_control_characters():
    from tmuxjail.listing import printable, table

    row = {"name": "a", "provider": "shell", "mode": "isolated", "status": "running", "agent": "-",
           "kind": "agent", "tmux_pane": "%1", "fingerprint": "sha256:00", "workspace": "/x/\x1b]2;t\x07",
           "server": os.devnull}
    assert "\x1b" not in table([row]) and "\x07" not in table([row])
    assert printable("a\x1bb\n") == "a?b?"
