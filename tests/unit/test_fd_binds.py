"""The launcher's contract with the call builder: every bind it marks, whose source lies in a tree
a jail can write, becomes --bind-fd/--ro-bind-fd of an fd opened without following a link; -try
keeps its meaning; a link refuses (exit 5). And the no-follow mkdir used to prepare state dirs."""

from __future__ import annotations

import os
import stat

import pytest

from tmuxjail.errors import SandboxUnavailable
from tmuxjail.pane import binds
from tmuxjail.paths import make_dirs_beneath
from tmuxjail.sandbox.bwrap import Call, agent_roots


def _policy(ws, **kw):
    base = dict(workspace_write=[str(ws)], workspace_read=[], host_write=[], host_read=[], private_home=None)
    base.update(kw)
    return base


def fd_binds(entries, policy, seal=(), command=("sh",)):
    """The launcher's step on a call of these setup entries, marked as the builder marks them:
    its flat argv (without bubblewrap's path) and the fds."""
    call = Call("/usr/bin/bwrap")
    call.setup = [tuple(e) for e in entries]
    call.mark_beneath(agent_roots(policy))
    call.seal, call.command = [tuple(e) for e in seal], list(command)
    fds = binds.fd_binds(call)
    return call.argv()[1:], fds


def _close(fds):
    for fd in fds:
        os.close(fd)


def test_binds_under_a_writable_root_become_fds_of_the_same_objects(tmp_path):
    ws = tmp_path / "ws"
    (ws / "a" / ".git").mkdir(parents=True)
    entries = [("--ro-bind", "/usr", "/usr"), ("--bind", str(ws), str(ws)), ("--bind", f"{ws}/a", f"{ws}/a"),
               ("--ro-bind", f"{ws}/a/.git", f"{ws}/a/.git"), ("--ro-bind-try", f"{ws}/missing", f"{ws}/missing"),
               ("--tmpfs", f"{ws}/x")]
    out, fds = fd_binds(entries, _policy(ws), seal=[("--chdir", str(ws))], command=["sh", "--bind", str(ws)])
    try:
        assert out[:3] == ["--ro-bind", "/usr", "/usr"]  # outside every root: left as it is
        assert out[-8:] == ["--tmpfs", f"{ws}/x", "--chdir", str(ws), "--", "sh", "--bind", str(ws)]
        kinds = [(out[i], out[i + 2]) for i in range(3, 3 + 3 * 3, 3)]
        assert kinds == [("--bind-fd", str(ws)), ("--bind-fd", f"{ws}/a"), ("--ro-bind-fd", f"{ws}/a/.git")]
        assert f"{ws}/missing" not in out  # -try, missing: no bind
        for fd, path in zip(fds, (ws, ws / "a", ws / "a" / ".git"), strict=True):
            assert os.fstat(fd).st_ino == os.stat(path).st_ino
    finally:
        _close(fds)


@pytest.mark.parametrize("where", ["leaf", "middle"])
@pytest.mark.parametrize("flag", ["--ro-bind", "--ro-bind-try", "--bind-try"])
def test_a_link_below_the_root_refuses(tmp_path, capsys, where, flag):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "lnk").symlink_to("/tmp")
    src = f"{ws}/lnk" if where == "leaf" else f"{ws}/lnk/x"
    with pytest.raises(SystemExit) as exc:
        fd_binds([(flag, src, src)], _policy(ws))
    assert exc.value.code == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{ws}/lnk is a symbolic link" in err[0]


def test_missing_source_refuses_without_try_and_a_mark_on_anything_but_a_bind_refuses(tmp_path, capsys):
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(SystemExit) as exc:
        fd_binds([("--ro-bind", f"{ws}/gone", f"{ws}/gone")], _policy(ws))
    assert exc.value.code == 5 and "is gone" in capsys.readouterr().err
    call = Call("/usr/bin/bwrap")
    call.setup, call.beneath = [("--symlink", f"{ws}/x", "/x")], {0: str(ws)}
    with pytest.raises(SystemExit) as exc:
        binds.fd_binds(call)
    assert exc.value.code == 3


def test_the_outermost_root_is_where_the_walk_starts(tmp_path, capsys):
    """A root inside another root (an approved path under a workspace) gives no way around the
    walk: a link above the inner root is still below the outer one."""
    ws = tmp_path / "ws"
    (ws / "real").mkdir(parents=True)
    (ws / "lnk").symlink_to(ws / "real")
    inner = f"{ws}/lnk"
    with pytest.raises(SystemExit):
        fd_binds([("--bind", inner, inner)], _policy(ws, host_write=[inner]))
    assert "symbolic link" in capsys.readouterr().err


def test_private_home_bind_is_an_fd_too(tmp_path):
    home = tmp_path / "homes" / "pi"
    home.mkdir(parents=True)
    out, fds = fd_binds([("--bind", str(home), "/home/u")], _policy(tmp_path / "ws", private_home=str(home)))
    try:
        assert out[:3] == ["--bind-fd", str(fds[0]), "/home/u"]
        assert stat.S_ISDIR(os.fstat(fds[0]).st_mode)
    finally:
        _close(fds)


def test_make_dirs_beneath_never_follows_a_link(tmp_path):
    home, ssh = tmp_path / "private", tmp_path / "ssh"
    home.mkdir()
    ssh.mkdir()
    make_dirs_beneath(str(home), f"{home}/.pi/agent")
    assert (home / ".pi" / "agent").is_dir()
    (home / ".claude").symlink_to(ssh)
    (home / ".dangling").symlink_to(tmp_path / "nowhere")
    (home / ".file").write_text("x")
    for rel in (".claude/tmp", ".dangling", ".dangling/x", ".file/x"):
        with pytest.raises(SandboxUnavailable, match="symbolic link or not a directory"):
            make_dirs_beneath(str(home), f"{home}/{rel}")
    assert list(ssh.iterdir()) == [] and not (tmp_path / "nowhere").exists()


def test_git_walk_finds_every_shape_follows_no_link_and_stops_at_the_cap(tmp_path, monkeypatch):
    from tmuxjail import host

    ws = tmp_path / "ws"
    for d in (".git", "a/b/.git", "node_modules/x/.git", "sep-meta"):
        (ws / d).mkdir(parents=True)
    (ws / "sub").mkdir()
    (ws / "sub" / ".git").write_text("gitdir: ../sep-meta\n")
    (ws / "out").mkdir()
    (ws / "out" / ".git").write_text(f"gitdir: {tmp_path}/elsewhere\n")
    (ws / "lnk").mkdir()
    (ws / "lnk" / ".git").symlink_to("/tmp")
    (ws / "dirlink").symlink_to(tmp_path / "other")
    (tmp_path / "other" / ".git").mkdir(parents=True)
    found, _, capped = host.guards([str(ws)])
    assert not capped
    # node_modules is looked into for repositories too (issue 26): `pip install -e git+` and
    # git dependencies put them there.
    assert found == tuple(sorted(f"{ws}/{p}" for p in (".git", "a/b/.git", "sub/.git", "sep-meta", "out/.git",
                                                          "lnk/.git", "node_modules/x/.git")))
    monkeypatch.setattr(host, "MAX_DIRS", 3)
    _, _, capped = host.guards([str(ws)])
    assert capped  # the caller refuses a strict start rather than guess
    monkeypatch.setattr(host, "MAX_DIRS", 10_000)
    for i in range(50):  # plain files never count: a jail cannot switch the walk off with them
        (ws / f"pad{i}").write_text("")
    monkeypatch.setattr(host, "MAX_DEPTH", 1)
    _, _, capped = host.guards([str(ws)])
    assert capped  # a/b/.git lies two levels down: its siblings' depth is past the limit


def test_git_walk_guards_submodules_under_skipped_names(tmp_path):
    from tmuxjail import host

    ws = tmp_path / "ws"
    (ws / "node_modules" / "dep").mkdir(parents=True)
    (ws / "node_modules" / "dep" / ".git").write_text("gitdir: ../../.git/modules/dep\n")
    (ws / ".gitmodules").write_text('[submodule "dep"]\n\tpath = node_modules/dep\n\turl = x\n')
    found, _, capped = host.guards([str(ws)])
    assert not capped and f"{ws}/node_modules/dep/.git" in found
