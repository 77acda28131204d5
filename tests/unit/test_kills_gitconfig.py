"""gitconfig, what its mutation run left alive: a workspace's git config (written by a jail, so
cut off or malformed anywhere) read as git reads it, and the paths it makes the host's git run."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from test_mutation_kills import _git_list  # git's own reading of a config

from tmuxjail import gitconfig

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git is not installed")



@pytest.mark.parametrize("text, parsed", [
    ("[s]\n\tk =", ([("s.k", "")], [])),  # ends right after "=": an empty value, not a crash
    ("[s]\n\tk = \t", ([("s.k", "")], [])),
    ('[core]\n\tfsmonitor = "touch x', ([], [2])),  # a quote open at the end: git refuses the file
    ('[s "x\\\n"]\n\tk = v\n', ([], [1, 2, 3])),  # a backslash does not carry a subsection over a line
])
def test_a_config_ending_or_breaking_mid_value_is_read_as_git_reads_it(tmp_path, text, parsed):
    git = _git_list(tmp_path, text)
    assert git == (parsed[0] if not parsed[1] else None), "git itself must read (or refuse) it so"
    assert gitconfig.parse(text) == parsed


def test_a_quoted_program_is_the_path_between_its_quotes():
    """A shell command whose program is quoted (a path with a space): git runs what lies between the
    quotes, so that is the path the audit follows and the launcher guards."""
    entries = [("core.fsmonitor", '"./tools/my mon" --fast'), ("core.sshcommand", "'bin/ssh"),
               ("alias.x", "!'./bin/x y' arg")]
    assert gitconfig.targets(entries, "/w/.git", "/w") == [
        ("core.fsmonitor", "/w/tools/my mon"), ("core.sshcommand", "/w/bin/ssh"), ("alias.x", "/w/bin/x y")]


def test_a_tool_path_key_names_a_program_in_the_worktree_whole(tmp_path):
    """mergetool/difftool.<tool>.path and lfs.customtransfer.<t>.path name a program, run from the
    worktree's top with its value taken whole; a bare name is looked up on PATH."""
    entries = [("difftool.vimdiff.path", "tools/my vim"), ("mergetool.m.path", "meld"),
               ("lfs.customtransfer.t.path", "./bin/xfer"), ("man.x.path", "/opt/man viewer")]
    assert gitconfig.targets(entries, "/w/.git", "/w") == [
        ("difftool.vimdiff.path", "/w/tools/my vim"), ("lfs.customtransfer.t.path", "/w/bin/xfer"),
        ("man.x.path", "/opt/man viewer")]


def test_git_runs_a_tool_path_whole_from_the_worktree_top(tmp_path):
    """What the test above relies on, seen from git itself: `git difftool` run in a subdirectory
    runs difftool.<tool>.path, a relative path with a space in it, from the worktree's top."""
    repo, marker = tmp_path / "r", tmp_path / "ran"
    (repo / "tools").mkdir(parents=True)
    (repo / "sub").mkdir()
    tool = repo / "tools" / "my vim"
    tool.write_text(f'#!/bin/sh\necho "$0" > {marker}\n')
    tool.chmod(0o755)
    (repo / "sub" / "f").write_text("a\n")
    env = {"HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"], "LANG": "C",
           "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b.invalid", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b.invalid"}

    def git(*args, cwd=repo):
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "x")
    (repo / "sub" / "f").write_text("b\n")
    git("config", "difftool.vimdiff.path", "tools/my vim")
    git("difftool", "-y", "--tool=vimdiff", cwd=repo / "sub")
    assert marker.read_text().strip() == "tools/my vim"
    entries, _ = gitconfig.parse((repo / ".git" / "config").read_text())
    assert gitconfig.targets(entries, str(repo / ".git"), str(repo)) == [("difftool.vimdiff.path", str(tool))]
