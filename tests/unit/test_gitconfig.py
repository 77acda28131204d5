"""The audit's own git-config reader, checked against git itself (`git config --file F --list`
on files written here, never on a workspace), and which keys it calls command-running; plus the
walk's bounds on a real tree."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tmuxjail import gitconfig, scan

SAMPLES = [
    "[core]\n\tfsmonitor = touch x\n",
    "[CORE]\n\tFSMonitor=\"a b\"  # comment\n\tpager\n",
    "[core] hooksPath = /h ; trailing\n[alias]\n st = !sh -c \"echo \\\"hi\\\"\"\n",
    "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tsmudge = a\\\n b\n",
    "[includeIf \"gitdir:~/w/\"]\n\tpath = ../x\n[Diff \"Tex\"] textconv = od\n",
    "[core.Sub]\n\tx = 1\n[merge \"m\\\"q\"]\n\tdriver = d %O\n",
    "; only a comment\n# another\n\n[credential \"https://h\"]\n\thelper = store\n",
    "[core]\r\n\teditor = vi\r\n",
    "[a]\n\tk = \"x\" y \"  z \"  \n",
]


@pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")
@pytest.mark.parametrize("text", SAMPLES)
def test_parser_agrees_with_git(tmp_path, text):
    f = tmp_path / "config"
    f.write_text(text, newline="")
    proc = subprocess.run(["git", "config", "--file", str(f), "--list", "-z"], capture_output=True,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"})
    assert proc.returncode == 0, proc.stderr
    theirs = []
    for item in proc.stdout.decode().split("\0")[:-1]:
        key, nl, value = item.partition("\n")
        theirs.append((key.lower(), value if nl else None))
    entries, bad = gitconfig.parse(text)
    assert bad == []
    assert [(k.lower(), v) for k, v in entries] == theirs


def test_what_git_refuses_is_reported_not_skipped():
    _entries, bad = gitconfig.parse("[core\nfsmonitor = x\n[core]\n\tpager = \"open\n[ok]\nk = \\q\n")
    assert bad == [1, 2, 4, 6]


@pytest.mark.parametrize("key,value,runs", [
    ("core.fsmonitor", "x", True), ("core.hookspath", "h", True), ("core.sshcommand", "s", True),
    ("core.pager", "p", True), ("core.editor", "e", True), ("core.askpass", "a", True),
    ("filter.x.clean", "c", True), ("filter.x.smudge", "c", True), ("filter.x.process", "c", True),
    ("diff.x.textconv", "t", True), ("diff.x.command", "t", True), ("merge.x.driver", "d", True),
    ("credential.helper", "h", True), ("credential.https://h.helper", "h", True),
    ("include.path", "p", True), ("includeif.gitdir:/x.path", "p", True), ("gpg.program", "g", True),
    ("gpg.ssh.program", "g", True), ("sequence.editor", "e", True), ("alias.st", "!sh", True),
    ("alias.co", "checkout", False), ("submodule.s.update", "!x", True), ("submodule.s.update", "merge", False),
    ("pager.log", "less", True), ("pager.log", "false", False), ("core.bare", "false", False),
    ("user.name", "x", False), ("remote.origin.uploadpack", "x", True), ("core.worktree", "/x", True),
])
def test_command_keys(key, value, runs):
    assert gitconfig.runs(key, value) is runs


def test_entry_cap_is_reported(tmp_path, monkeypatch):
    for i in range(50):
        (tmp_path / f"f{i}").write_text("x")
    (tmp_path / ".envrc").write_text("x")
    (tmp_path / "zz" / ".git").mkdir(parents=True)
    monkeypatch.setattr(scan, "MAX_ENTRIES", 20)
    s = scan.scan([str(tmp_path)])
    assert any(c.startswith("entry cap") for c in s.capped)
    # Names and repositories come before the per-file lstat: the padding hides neither (issue 26).
    assert {os.path.relpath(f["path"], tmp_path) for f in s.findings} >= {".envrc", "zz/.git"}
    monkeypatch.setattr(scan, "MAX_LISTED", 30)
    assert any(c.startswith("entry cap") for c in scan.scan([str(tmp_path)]).capped)


def test_the_walk_never_follows_a_symlinked_directory(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    (outside / ".git").mkdir(parents=True)
    (outside / ".envrc").write_text("x")
    (ws / "in").symlink_to(outside)
    kinds = {(os.path.relpath(f["path"], ws), f["kind"]) for f in scan.scan([str(ws)]).findings}
    assert kinds == {("in", "symlink-out")}


def test_a_huge_config_is_reported_not_parsed(tmp_path):
    git = tmp_path / ".git"
    git.mkdir()
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text("[core]\n" + "\tbare = false\n" * 40000 + "\tfsmonitor = x\n")
    details = {f["detail"] for f in scan.scan([str(tmp_path)]).findings if f["kind"] == "git-config"}
    assert details == {"not parsed (too large or unreadable): check it by hand"}


@pytest.mark.parametrize("text, parsed", [
    ("[core]\n\tfsmonitor = x", ([("core.fsmonitor", "x")], [])),
    ("[core]\n\tbare", ([("core.bare", None)], [])),
    ('[core]\n\tx = "a\\"b"', ([("core.x", 'a"b')], [])),
    ("[core", ([], [1])),
    ('[remote "a', ([], [1])),
    ('[remote "a"', ([], [1])),
    ('[remote "a\\', ([], [1])),
    ("[core]\nx = a\\", ([], [2])),
    ("[a ", ([], [1])),
])
def test_a_config_cut_off_anywhere_is_parsed_or_reported_never_a_crash(text, parsed):
    """A workspace's config ending mid-name, mid-header or mid-escape (no newline at the end: a
    jail writes what it likes) is read to its end without indexing past it."""
    assert gitconfig.parse(text) == parsed


def test_targets_are_what_a_config_makes_git_read_or_run_by_path(monkeypatch):
    """Every entry is looked at (one that runs nothing, or a program on PATH, does not end the
    walk); includes resolve against the config's directory, hooks and programs against the
    worktree, `~` against HOME; empty and (in a bare repository) relative paths are left out."""
    monkeypatch.setenv("HOME", "/home/u")
    entries = [("core.bare", None), ("user.name", "x"), ("user.signingkey", "keys/me.pub"), ("core.fsmonitor", None),
               ("core.fsmonitor", "watchman"),
               ("include.path", "../shared.inc"), ("includeif.gitdir:/w/.path", "more.inc"),
               ("core.hookspath", "hooks"), ("core.fsmonitor", "./tools/mon --fast"),
               ("core.sshcommand", "/usr/bin/ssh -v"), ("include.path", "~/x.inc"), ("include.path", " "),
               ("alias.st", "status"), ("alias.x", "!bin/x")]
    assert gitconfig.targets(entries, "/w/.git", "/w") == [
        ("include.path", "/w/shared.inc"), ("includeif.gitdir:/w/.path", "/w/.git/more.inc"),
        ("core.hookspath", "/w/hooks"), ("core.fsmonitor", "/w/tools/mon"),
        ("core.sshcommand", "/usr/bin/ssh"), ("include.path", "/home/u/x.inc"), ("alias.x", "/w/bin/x")]
    assert gitconfig.targets(entries, "/w.git", None) == [
        ("include.path", "/shared.inc"), ("includeif.gitdir:/w/.path", "/w.git/more.inc"),
        ("core.sshcommand", "/usr/bin/ssh"), ("include.path", "/home/u/x.inc")]


def test_every_path_a_shell_command_names_is_a_target(monkeypatch):
    """Round three of the red team: `sh tools/clean.sh` as a filter and `!bash tools/rel.sh` as an
    alias ran the agent's script (only `sh` and `bash` were looked at); `~/...` was left out."""
    monkeypatch.setenv("HOME", "/home/u")
    entries = [("filter.x.clean", "sh tools/clean.sh --in=%f"), ("alias.rel", "!bash tools/rel.sh --cfg=conf/a"),
               ("core.hookspath", "~/src/r/hooks")]
    assert gitconfig.targets(entries, "/w/.git", "/w") == [
        ("filter.x.clean", "/w/tools/clean.sh"), ("alias.rel", "/w/tools/rel.sh"), ("alias.rel", "/w/conf/a"),
        ("core.hookspath", "/home/u/src/r/hooks")]


def test_an_empty_command_value_names_no_file():
    """`[credential] helper =` (which resets the helper list) and a bare `!` alias name nothing:
    the walk of a repository that has one must not fail."""
    from tmuxjail import gitconfig

    entries = [("credential.helper", ""), ("alias.x", "!"), ("core.pager", "  "), ("filter.a.clean", "'./x' y")]
    assert gitconfig.targets(entries, "/r/.git", "/r") == [("filter.a.clean", "/r/x")]


def test_a_repository_whose_config_resets_the_credential_helper_is_walked(tmp_path):
    """The start's walk for git metadata (host.guards) reads every repository's config: one with
    `helper =` (the documented way to reset the helper list) failed it, and so the start."""
    from tmuxjail import host

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[credential]\n\thelper =\n[alias]\n\tx = !\n")
    assert str(tmp_path / ".git") in host.guards([str(tmp_path)]).git


@pytest.mark.parametrize(("key", "value", "opaque"), [
    ("filter.x.clean", "sh clean.sh", True), ("filter.x.clean", 'bash -c "tools/x"', True),
    ("filter.x.clean", "cd tools && ./x", True), ("filter.x.clean", "true;tools/x", True),
    ("filter.x.clean", "sh <tools/x", True), ("filter.x.clean", "python3 -m tools.x", True),
    ("filter.x.clean", '"$(git rev-parse --show-toplevel)/tools/x"', True), ("core.fsmonitor", "/usr/bin/env x", True),
    ("filter.lfs.clean", "git-lfs clean -- %f", False), ("filter.x.clean", "tools/x --fast", False),
    ("alias.lg", "!git log | less", False), ("core.pager", "less -R | cat", False), ("credential.helper", "!f() { x; }; f", False),
    ("core.hookspath", "a;b", False), ("user.name", "a;b", False),
    ("filter.x.clean", "nice sh clean.sh", True), ("filter.x.clean", "timeout 5 sh clean.sh", True),
    ("filter.x.clean", "LC_ALL=C sh clean.sh", True), ("filter.x.clean", "'s'h clean.sh", True),
    ("filter.x.clean", "awk -f clean.awk", True), ("filter.x.clean", "make -s -C tools", True),
])
def test_a_command_git_runs_by_itself_is_opaque_when_its_words_are_no_paths(key, value, opaque):
    """Round four of the red team: `sh clean.sh`, `bash -c "..."`, `cd tools && ./x`, `true;x`,
    `sh <x`, `python3 -m x` and `$(...)` ran the agent's files with no word naming them."""
    assert gitconfig.opaque(key, value) is opaque
