"""Issue 13, items 1 and 3: the places where tmuxjail, outside the jail, acts on a path the jail
could have planted (binds on a relaunch or a new start, directories it prepares in a private home
or an approved path), and git metadata that the host's git later trusts. Every attack runs from
inside a real jailed pane; the host side then does what a user would (resume, `tmuxjail shell`, a
split, a new start, `git status` / `git commit` with a clean environment)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from test_escapes import STRICT, Jail

pytestmark = pytest.mark.adversarial


def host_git(env, cwd: Path, *args, check=False) -> subprocess.CompletedProcess:
    """git as the user runs it later, on the host: no system config, HOME = the test home."""
    clean = {"HOME": str(env.home), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C",
             "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u",
             "GIT_COMMITTER_EMAIL": "u@x", "GIT_ALLOW_PROTOCOL": "file"}
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, env=clean,
                          capture_output=True, text=True, check=check)


def _repo(env, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    host_git(env, path, "init", "-q", check=True)
    (path / "README").write_text("x\n")
    host_git(env, path, "add", "README", check=True)
    host_git(env, path, "commit", "-qm", "init", check=True)


def _shell_in(env, jail_name: str, n: int) -> Jail:
    """A second jailed shell of a session, through `tmuxjail shell`."""
    info = env.json("shell", jail_name, "--detach")
    other = Jail.__new__(Jail)
    other.env, other.mode, other.name, other.n = env, "?", jail_name, n
    other.ws, other.target = env.ws.resolve(), info["shell_pane"]
    return other


def _split_of(env, jail: Jail, n: int) -> Jail:
    """tmux's own split of a jailed session: the session's default-command."""
    pane = env.tmux("split-window", "-d", "-t", f"={jail.name}:", "-P", "-F", "#{pane_id}").strip()
    other = Jail.__new__(Jail)
    other.env, other.mode, other.name, other.n, other.ws, other.target = env, jail.mode, jail.name, n, jail.ws, pane
    return other


# -- git metadata (item 3) ---------------------------------------------------------------------

def _git_world(env):
    """A workspace holding each shape of git metadata: a repository with a submodule (a `.git`
    file pointing into .git/modules), a linked worktree (a `.git` file with an absolute gitdir
    into .git/worktrees), a `.git` file whose gitdir has another name, and a nested repository two
    directories down."""
    ws = env.ws
    _repo(env, env.outside / "subsrc")
    _repo(env, ws)
    host_git(env, ws, "submodule", "add", "-q", str(env.outside / "subsrc"), "sub", check=True)
    host_git(env, ws, "commit", "-qm", "sub", check=True)
    host_git(env, ws, "worktree", "add", "-q", str(ws / "wt"), check=True)
    _repo(env, ws / "deep" / "er" / "nested")
    # A .git file whose gitdir is no `.git` at all (git init --separate-git-dir).
    (ws / "sep").mkdir()
    host_git(env, ws / "sep", "init", "-q", "--separate-git-dir", str(ws / "sep-meta"), check=True)
    assert (ws / "sub/.git").is_file() and (ws / "wt/.git").is_file() and (ws / "sep/.git").is_file()


def _host_runs_nothing(env, ran: Path) -> None:
    ws = env.ws
    # (A repository the agent made itself, like fresh/, is its own: the host's git in the
    # workspace must simply not reach into it.)
    for cwd in (ws, ws / "sub", ws / "wt", ws / "sep", ws / "deep/er/nested"):
        host_git(env, cwd, "status")
        host_git(env, cwd, "commit", "-q", "--allow-empty", "-m", "host")
    assert not list(ran.parent.glob(ran.name + "*")), sorted(p.name for p in ran.parent.glob(ran.name + "*"))


@pytest.mark.parametrize("mode", STRICT)
def test_git_bypasses_run_nothing_on_the_host(world, mode):
    """The four bypasses of issue 13 item 3, and their variants on a submodule, a worktree and a
    nested repository: afterwards the host's git status / commit in each runs nothing."""
    env = world
    _git_world(env)
    ran = env.outside / "ran"
    jail = Jail(env, mode)
    out = jail.sh(f"""
        run() {{ sh -c "$2" 2>/dev/null && echo "$1"; }}
        mkdir -p evil/hooks
        printf '[core]\\n\\tfsmonitor = touch {ran}.commondir\\n' > evil/config
        printf '#!/bin/sh\\ntouch {ran}.hook\\n' > evil/hooks/pre-commit; chmod +x evil/hooks/pre-commit
        # 1. commondir pointing at a directory with its own config and hooks
        run COMMONDIR 'echo ../evil > .git/commondir'
        run WT_COMMONDIR 'echo {jail.ws}/evil > .git/worktrees/wt/commondir'
        # 2. a nested repository's config, and a gitlink for it in the index
        run NESTED_CONFIG 'git -C deep/er/nested config core.fsmonitor "touch {ran}.nested"'
        git init -q fresh && git -C fresh config core.fsmonitor "touch {ran}.fresh" && \\
          git -C fresh -c user.name=a -c user.email=a@b commit -q --allow-empty -m x
        run GITLINK 'git update-index --add --cacheinfo 160000,$(git -C fresh rev-parse HEAD),fresh'
        # 4. .git files: repoint them, or change what they point at
        run SUB_GITFILE 'echo "gitdir: ../evil" > sub/.git'
        run WT_GITFILE 'echo "gitdir: {jail.ws}/evil" > wt/.git'
        run SUB_CONFIG 'git -C sub config core.fsmonitor "touch {ran}.sub"'
        run WT_CONFIG 'git -C wt config core.fsmonitor "touch {ran}.wt"'
        run SEP_CONFIG 'git -C sep config core.fsmonitor "touch {ran}.sep"'
        run HOOK 'cp evil/hooks/pre-commit .git/hooks/pre-commit'
        run SUB_HOOK 'cp evil/hooks/pre-commit .git/modules/sub/hooks/pre-commit'
        # 3. move .git (or a directory above a nested one) away, and make a fresh one
        fresh() {{ git init -q "$1" && git -C "$1" config core.fsmonitor "touch {ran}.$2"; }}
        run MV_NESTED_GIT 'mv deep/er/nested/.git deep/er/nested/.git-old'
        run MV_ABOVE_NESTED 'mv deep deep-old && mkdir -p deep/er/nested'
        run MV_SUB 'mv sub sub-old && mkdir sub'
        run RM_SUB_GITFILE 'rm -f sub/.git'
        run MV_GIT 'mv .git .git-old'
        fresh deep/er/nested mvdeep 2>/dev/null; fresh sub mvsub 2>/dev/null; fresh . mvgit 2>/dev/null
        git status >/dev/null 2>&1 && echo STATUS_OK
        echo end
    """, timeout=30)
    _host_runs_nothing(env, ran)
    assert out.split() == ["STATUS_OK", "end"], out


def test_git_metadata_write_lifts_the_guard_in_isolated_mode_with_a_warning(world):
    env = world
    _repo(env, env.ws)
    proc = env.run("start", "shell", "--mode", "isolated", "--capability", "git-metadata-write",
                   "--workspace", str(env.ws), "--name", "j", "--detach", check=True)
    assert "git-metadata-write" in proc.stderr and "host" in proc.stderr, proc.stderr
    jail = Jail.__new__(Jail)
    jail.env, jail.mode, jail.name, jail.ws, jail.n = env, "isolated", "j", env.ws.resolve(), 0
    out = jail.sh("echo y > g && git add g && git -c user.name=a -c user.email=a@b commit -qm m && echo COMMIT_OK")
    assert out.split() == ["COMMIT_OK"], out
    for caps in (("aws",), ("git-metadata-write", "aws")):  # still the only one isolated mode takes
        args = [a for c in caps for a in ("--capability", c)]
        bad = env.run("start", "shell", "--mode", "isolated", *args, "--workspace", str(env.ws), "--name", "k")
        assert bad.returncode == 2 and "verified mode only" in bad.stderr, bad.stderr


# -- relaunch and new starts follow no link (item 1) ------------------------------------------

@pytest.mark.parametrize("mode", STRICT)
def test_relaunch_after_swapping_git_for_links_reveals_nothing(world, mode):
    """The issue's attack: `mv .git .git-old; mkdir .git; ln -s .../tmp/tmux-UID .git/hooks` (and
    `.git/config -> ~/.netrc`), then every relaunch path. .git cannot be moved (a mount point),
    and no relaunch shows the host's tmux dir or ~/.netrc."""
    env = world
    _repo(env, env.ws)
    (env.home / ".netrc").write_text("machine example.org password NETRC-SECRET\n")
    tmux_dir = f"/tmp/tmux-{os.getuid()}"
    jail = Jail(env, mode)
    to_tmux = os.path.relpath(tmux_dir, jail.ws / ".git")
    to_netrc = os.path.relpath(env.home / ".netrc", jail.ws / ".git")
    out = jail.sh(f"""
        mv .git .git-old 2>/dev/null && echo MOVED
        mkdir -p .git 2>/dev/null; ln -s {to_tmux} .git/hooks 2>/dev/null && echo HOOKS_LINK
        ln -s {to_netrc} .git/config 2>/dev/null && echo CONFIG_LINK
        echo end
    """)
    assert out.split() == ["end"], out
    sock = env.tmux("display-message", "-p", "#{socket_path}").strip()
    look = f"""
        ls -A {tmux_dir} .git/hooks 2>/dev/null | grep -q {env.socket} && echo TMUX_DIR
        test -S {sock} && echo SOCKET
        cat .git/config ~/.netrc {env.home}/.netrc 2>/dev/null | grep -q NETRC-SECRET && echo NETRC
        echo end
    """
    assert _shell_in(env, "j", 100).sh(look).split() == ["end"]
    assert _split_of(env, jail, 200).sh(look).split() == ["end"]
    env.kill()
    env.run("resume", "j", "--detach", check=True)
    assert jail.sh(look).split() == ["end"]


def _plant_and_start_again(env, mode, plant: str, name: str) -> subprocess.CompletedProcess:
    first = Jail(env, mode, name="j")
    assert first.sh(plant + "\necho end").split()[-1:] == ["end"]
    return env.run("start", "shell", "--mode", mode, "--workspace", str(env.ws), "--name", name, "--detach")


@pytest.mark.parametrize("mode", STRICT)
@pytest.mark.parametrize("shape", ["dot-git-link", "gitdir-through-link"])
def test_new_start_refuses_links_a_jail_planted_where_it_binds(world, mode, shape):
    """A jail in a workspace that is no repository plants a `.git` that is a link to the host's
    /tmp (or a `.git` file whose gitdir runs through such a link). The next start on that
    workspace must bind nothing through it: bwrap would resolve the source on the host and mount
    the host's /tmp, tmux socket and all, into the new jail. It refuses, in one line."""
    env = world
    ws = env.ws.resolve()
    to_tmp = os.path.relpath("/tmp", ws)
    uid = os.getuid()
    plant = {
        "dot-git-link": f"ln -s {to_tmp} .git",
        "gitdir-through-link": f"ln -s {to_tmp} lnk; mkdir sub; echo 'gitdir: ../lnk/tmux-{uid}' > sub/.git",
    }[shape]
    proc = _plant_and_start_again(env, mode, plant, "k")
    if proc.returncode == 0:  # say what the new jail can reach
        second = Jail.__new__(Jail)
        second.env, second.mode, second.name, second.ws, second.n = env, mode, "k", ws, 100
        seen = second.sh(f"tmux -L {env.socket} ls 2>&1")
        raise AssertionError(f"the new jail started; inside, the host's tmux: {seen!r}")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 5, (proc.returncode, proc.stderr)
    assert "symbolic link" in lines[0] and "Traceback" not in proc.stderr, lines
    status = dict(sqlite3.connect(env.store).execute("SELECT name, status FROM sessions").fetchall())
    assert status == {"j": "running", "k": "failed"}, status
    # The same workspace's own session refuses to relaunch into the changed policy, too.
    assert env.run("shell", "j", "--detach").returncode == 3
    env.kill()
    assert env.run("resume", "j", "--detach").returncode == 3


# -- preparing directories in agent-writable trees (item 1, host side) -------------------------

def _cli_shell(env, mode: str, provider: str = "pi") -> Jail:
    env.run("approve", provider, "--yes", check=True)
    env.run("start", provider, "--mode", mode, "--workspace", str(env.ws), "--name", "p", "--detach", check=True)
    shell = _shell_in(env, "p", 0)
    shell.name = "p"
    return shell


@pytest.mark.parametrize("case", ["isolated-link-to-ssh", "isolated-dangling", "verified-dangling",
                                  "verified-codex-config"])
def test_prepare_never_follows_a_link_left_in_the_home(world, case):
    """`~/.pi -> ~/.ssh` left in a private home made tmuxjail create ~/.ssh/agent on the host at
    the next resume; a dangling link crashed it. Now the resume refuses in one line.
    A verified jail itself can no longer replace ~/.pi/agent (it holds the provider-state guards
    and is bound onto itself: test_provider_state), so there the link comes from a compatibility
    jail, which writes the real home by design (and so for a guarded file in Codex's state, which a
    verified jail cannot replace either). Each plant checks that the link is really there
    (an `ln -s` onto a directory that stayed makes a link inside it, and the test would pass
    without testing anything)."""
    env = world
    mode = case.split("-")[0]
    shell = _cli_shell(env, mode, "codex" if "codex" in case else "pi")
    if mode == "verified":
        shell = Jail(env, "compatibility", name="c")
    plant = {
        "isolated-link-to-ssh": f"rm -rf ~/.pi; ln -s {env.home}/.ssh ~/.pi; test -L ~/.pi",
        "isolated-dangling": "rm -rf ~/.pi; ln -s /nonexistent-tj ~/.pi; test -L ~/.pi",
        "verified-dangling": "rm -rf ~/.pi/agent; ln -s /nonexistent-tj ~/.pi/agent; test -L ~/.pi/agent",
        "verified-codex-config": "rm -f ~/.codex/config.toml; ln -s /nonexistent-tj ~/.codex/config.toml; "
                                 "test -L ~/.codex/config.toml",
    }[case]
    assert shell.sh(plant + " && echo PLANTED").split() == ["PLANTED"]
    env.kill()
    proc = env.run("resume", "p", "--detach")
    assert proc.returncode == 5, (proc.returncode, proc.stdout, proc.stderr)
    assert "symbolic link" in proc.stderr.splitlines()[0] and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in (env.home / ".ssh").iterdir()) == ["id_ed25519"]
    assert not Path("/nonexistent-tj").exists()
