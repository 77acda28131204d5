"""Issue 32, the pure parts: git's command keys switched off, names, the config table, the
request and policy fields, the branch read from a git directory as text, trusted paths."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from tmuxjail import config, gitrun, policy, worktree
from tmuxjail.errors import ConfigError, UsageError
from tmuxjail.request import StartRequest


def test_switched_off_covers_every_command_key_and_keeps_the_rest():
    listing = "\0".join([
        "core.fsmonitor\ntouch x", "filter.lfs.smudge\ngit-lfs smudge", "filter.lfs.required\ntrue",
        "diff.evil.textconv\ncat", "merge.m.driver\nx", "alias.st\n!sh", "alias.co\ncheckout",
        "user.name\nU", "include.path\n/x", "core.worktree\n/w", "pager.log\nless", "pager.diff\nfalse",
        "credential.helper\nstore", "core.hooksPath\n/h", "Filter.X.Clean\nc",
        "includeIf.onbranch:main.path\n../tools/c.cfg", "includeif.gitdir:/w/.path\nx.inc"]) + "\0"
    off = gitrun.switched_off(listing)
    keys = [off[i + 1] for i in range(0, len(off), 2)]
    assert all(off[i] == "-c" for i in range(0, len(off), 2))
    assert keys == ["filter.lfs.smudge=", "diff.evil.textconv=", "merge.m.driver=", "alias.st=", "pager.log=",
                    "Filter.X.Clean="]  # core.fsmonitor, hooksPath, credential.helper: SAFE sets them itself
    # An empty include on git's command line is fatal ("relative config includes must come from
    # files"): a repository with an includeIf could not start a worktree. Includes are kept.


def test_git_environment_drops_what_steers_git_and_keeps_who_commits(monkeypatch):
    monkeypatch.setenv("GIT_DIR", "/evil")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor=touch x'")
    monkeypatch.setenv("GIT_EXEC_PATH", "/evil")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Me")
    env = gitrun.env()
    assert "GIT_DIR" not in env and "GIT_CONFIG_PARAMETERS" not in env and "GIT_EXEC_PATH" not in env
    assert env["GIT_AUTHOR_NAME"] == "Me" and env["GIT_TERMINAL_PROMPT"] == "0"


@pytest.mark.parametrize("name", ["a", "fix-1", "A.b_c", "x" * 63])
def test_good_names(name):
    assert worktree.check_name(name) == name


@pytest.mark.parametrize("name", ["", "-x", ".x", "a/b", "a..b", "a.lock", "a.", "x" * 64, "a b", "a\x1bb", "é"])
def test_bad_names(name):
    with pytest.raises(UsageError):
        worktree.check_name(name)


def test_config_worktree_table():
    cfg = config.parse('[worktree]\nroot = "~/wt"\nbranch_prefix = "agents/x/"\n', "c")
    assert cfg.worktree_root == "~/wt" and cfg.branch_prefix == "agents/x/"
    assert config.parse("", "c").branch_prefix == "tmuxjail/"
    for bad in ('root = "rel"', 'branch_prefix = "../"', 'branch_prefix = "x"', 'other = 1', 'root = 3'):
        with pytest.raises(ConfigError):
            config.parse("[worktree]\n" + bad + "\n", "c")


def test_where_puts_it_beside_the_repository_or_under_the_root(tmp_path):
    assert worktree.where("/src/app", "one", None, "/home/u") == "/src/app.worktrees/one"
    assert worktree.where("/src/app", "one", "/wt", "/home/u") == "/wt/app/one"
    assert worktree.where("/src/app", "one", "~/wt", str(tmp_path)) == f"{tmp_path}/wt/app/one"


WT = {"id": "one-0", "name": "one", "branch": "tmuxjail/one", "base": "a" * 40, "repo": "/r", "common": "/r/.git",
      "objects": "/r/.git/objects", "path": "/r.worktrees/one", "gitdir": "/s/worktrees/one-0/git",
      "import": "/s/worktrees/one-0/import"}


def test_the_request_keeps_its_worktree_and_refuses_a_broken_one():
    req = StartRequest("shell", mode="isolated", workspaces=("/r.worktrees/one",), worktree=WT)
    assert StartRequest.from_json(req.to_json()).worktree == WT
    broken = req.to_json().replace('"branch": "tmuxjail/one"', '"branch": 3')
    with pytest.raises(ValueError, match="worktree"):
        StartRequest.from_json(broken)
    assert "worktree" not in StartRequest("shell", workspaces=("/w",)).to_json()


def _facts(**kw):
    from tmuxjail.identity import Resolved  # noqa: F401 - the type facts carry

    base = dict(home="/home/u", uid=1000, user="u", login_shell="/bin/sh", own_dirs=("/c", "/s", "/d"),
                config_dir="/c", private_home="/d/homes/x", backend="bwrap", executable=None,
                allowed_modes=("compatibility", "isolated", "verified"))
    base.update(kw)
    return policy.Facts(**base)


def test_policy_refuses_a_worktree_outside_strict_modes():
    from tmuxjail.model import Mode

    facts = _facts()
    for mode in (Mode.compatibility,):
        with pytest.raises(UsageError, match="needs isolated or verified"):
            policy._check_worktree(("/s/worktrees/one-0/git", "/r/.git/objects"), mode, facts)
    with pytest.raises(UsageError, match="bubblewrap"):
        policy._check_worktree(("/s/worktrees/one-0/git", "/r/.git/objects"), Mode.isolated,
                               replace(facts, backend="seatbelt"))
    with pytest.raises(UsageError, match="not in tmuxjail's state"):
        policy._check_worktree(("/elsewhere/git", "/r/.git/objects"), Mode.isolated, facts)
    policy._check_worktree(("/s/worktrees/one-0/git", "/r/.git/objects"), Mode.verified, facts)


def _gitdir(tmp_path: Path) -> dict:
    g = tmp_path / "git"
    (g / "refs" / "heads" / "tmuxjail").mkdir(parents=True)
    return {**WT, "gitdir": str(g)}


def test_tip_reads_the_loose_ref_then_packed_refs_and_nothing_else(tmp_path):
    wt = _gitdir(tmp_path)
    g = Path(wt["gitdir"])
    with pytest.raises(worktree.WorktreeError, match="gone"):
        worktree.tip(wt)
    (g / "packed-refs").write_text(f"# pack-refs with: peeled\n{'b' * 40} refs/heads/tmuxjail/one\n^{'c' * 40}\n")
    assert worktree.tip(wt) == "b" * 40
    (g / "refs/heads/tmuxjail/one").write_text("d" * 40 + "\n")
    assert worktree.tip(wt) == "d" * 40
    (g / "refs/heads/tmuxjail/one").write_text("ref: refs/heads/master\n")
    with pytest.raises(worktree.WorktreeError, match="not a commit id"):
        worktree.tip(wt)
    (g / "refs/heads/tmuxjail/one").unlink()
    os.symlink("/etc/hostname", g / "refs/heads/tmuxjail/one")
    with pytest.raises(worktree.WorktreeError, match="not a plain file"):
        worktree.tip(wt)
    (g / "refs/heads/tmuxjail/one").unlink()
    os.rmdir(g / "refs/heads/tmuxjail")
    os.symlink(str(tmp_path), g / "refs/heads/tmuxjail")  # a directory on the way that is a link
    with pytest.raises(worktree.WorktreeError, match="not a plain file"):
        worktree.tip(wt)


def test_the_import_pack_holds_the_reachable_loose_objects_and_follows_no_link(tmp_path):
    import subprocess

    src = tmp_path / "src"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    run = lambda *a: subprocess.run(["git", "-C", str(src), *a], env=env, capture_output=True, text=True,  # noqa: E731
                                    check=True).stdout.strip()
    src.mkdir()
    run("init", "-q")
    (src / "f").write_text("one\n")
    run("add", "f")
    run("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "c")
    commit = run("rev-parse", "HEAD")
    junk = run("hash-object", "-w", "--stdin", "--no-filters", str(src / "f"))  # reachable anyway (the blob)
    other = subprocess.run(["git", "-C", str(src), "hash-object", "-w", "--stdin"], input="unreachable\n", env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    objs = src / ".git" / "objects"
    os.symlink("/etc/hostname", objs / "zz")
    wt = {**WT, "gitdir": str(src / ".git")}
    got: list[bytes] = []
    worktree._packs(wt, commit, "sha1", lambda fd: got.append(os.read(fd, 1 << 20)))
    assert len(got) == 1
    data = got[0]
    assert data[:4] == b"PACK" and int.from_bytes(data[8:12], "big") == 3  # commit, tree, blob; not `other`
    dest = tmp_path / "dest"
    subprocess.run(["git", "init", "-q", str(dest)], env=env, check=True)
    subprocess.run(["git", "-C", str(dest), "index-pack", "--stdin", "--strict"], input=data, env=env, check=True,
                   capture_output=True)
    assert subprocess.run(["git", "-C", str(dest), "cat-file", "-t", commit], env=env, capture_output=True,
                          text=True).stdout.strip() == "commit"
    assert subprocess.run(["git", "-C", str(dest), "cat-file", "-e", other], env=env).returncode != 0
    assert junk


def test_shown_makes_control_characters_visible():
    assert worktree.shown("ok\x1b[2Jx\ny\tz\x7f\u009b") == "ok\\x1b[2Jx\ny\tz\\x7f\\x9b"


def test_host_trusted_names_hooks_attributes_and_direnv_not_code():
    changed = [{"status": "A", "path": p} for p in (
        "src/app.py", ".gitattributes", "sub/.gitmodules", ".husky/pre-commit", ".envrc", "README.md", "package.json")]
    names = [t["path"] for t in worktree.host_trusted(changed)]
    assert ".gitattributes" in names and "sub/.gitmodules" in names and ".husky/pre-commit" in names
    assert ".envrc" in names and "src/app.py" not in names and "README.md" not in names


def test_pack_headers_and_the_links_an_object_names():
    assert worktree._pack_header(3, 5) == bytes([0x35])
    assert worktree._pack_header(1, 16) == bytes([0x90, 0x01])
    assert worktree._pack_header(2, 1000) == bytes([0xA8, 0x3E])
    a, b = "a" * 40, "b" * 40
    raw = bytes.fromhex
    commit = f"tree {a}\nparent {b}\nauthor x <x> 0 +0000\n\nparent {'c' * 40}\n".encode()
    assert worktree._links(b"commit", commit, 20) == {raw(a), raw(b)}
    tree = b"100644 f\0" + raw(a) + b"160000 sub\0" + raw(b) + b"40000 d\0" + raw("d" * 40)
    assert worktree._links(b"tree", tree, 20) == {raw(a), raw("d" * 40)}  # a gitlink's commit is another repository's
    assert worktree._links(b"tree", tree.replace(b"160000 sub\0" + raw(b), b""), 20) == {raw(a), raw("d" * 40)}
    assert worktree._links(b"tree", b"100644 cut\0abc", 20) == set()
    assert worktree._links(b"tag", f"object {a}\ntype commit\n".encode(), 20) == {raw(a)}
    assert worktree._links(b"blob", b"tree " + a.encode(), 20) == set()


def test_the_walk_parses_a_hostile_tree_in_linear_time_and_counts_its_entries_first(tmp_path, monkeypatch):
    """Round three of the red team: a tree of "100644 " repeated and no NUL made the entry
    regex scan to the end from every position (hours: land and list hung); 9,000,000 entries of
    one id passed the link bound (it counted distinct ids) and took 1.2 GB."""
    import io
    import time
    import zlib

    objs = tmp_path / "objects"

    def put(kind: bytes, body: bytes) -> str:
        import hashlib
        raw = kind + b" " + str(len(body)).encode() + b"\0" + body
        oid = hashlib.sha1(raw).hexdigest()
        (objs / oid[:2]).mkdir(parents=True, exist_ok=True)
        (objs / oid[:2] / oid[2:]).write_bytes(zlib.compress(raw))
        return oid

    t0 = time.perf_counter()
    assert worktree._links(b"tree", b"100644 " * 60_000, 20) == set()  # (the old regex: ~17 s; 4 M: days)
    assert worktree._links(b"tree", b"100644 a\0" + b"x" * 19, 20) == set()  # cut short
    assert time.perf_counter() - t0 < 3
    same = b"".join(b"100644 f%d\0" % i + b"\1" * 20 for i in range(50))
    commit = put(b"commit", f"tree {put(b'tree', same)}\n\nx\n".encode())
    monkeypatch.setattr(worktree, "MAX_LINKS", 40)
    ofd = os.open(objs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(worktree.WorktreeError, match="more than 40"):
            worktree._walk_loose(ofd, commit, {}, 1 << 30, 20, io.BytesIO())
    finally:
        os.close(ofd)


def test_loose_files_that_are_no_object_cost_what_they_read(tmp_path):
    """Round three: one 250 MiB sparse file of no zlib, hard-linked under 40 names a tree points
    to, was read whole 40 times (16 s, 530 MB) and charged nothing. Now: a sparse one is refused,
    a second name of a file already read is skipped, and what is read counts against the budget."""
    import io
    import zlib

    objs = tmp_path / "objects"
    names = [f"{i:02x}" + "e" * 38 for i in range(3)]
    tree = b"".join(b"100644 f%d\0" % i + bytes.fromhex(n) for i, n in enumerate(names))
    raw = b"tree " + str(len(tree)).encode() + b"\0" + tree
    import hashlib
    tid = hashlib.sha1(raw).hexdigest()
    for oid, data in ((tid, zlib.compress(raw)),):
        (objs / oid[:2]).mkdir(parents=True, exist_ok=True)
        (objs / oid[:2] / oid[2:]).write_bytes(data)
    first = objs / names[0][:2] / names[0][2:]
    first.parent.mkdir(parents=True, exist_ok=True)
    first.write_bytes(b"no zlib here" * 100_000)  # 1.2 MB of garbage, not sparse
    for n in names[1:]:
        (objs / n[:2]).mkdir(parents=True, exist_ok=True)
        os.link(first, objs / n[:2] / n[2:])
    ofd = os.open(objs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inodes: set = set()
        body, used = worktree._read_object(ofd, f"{names[0][:2]}/{names[0][2:]}", 1 << 30, {}, inodes)
        assert body is None and 0 < used <= 1 << 20  # the first piece did not inflate: no more read
        assert worktree._read_object(ofd, f"{names[1][:2]}/{names[1][2:]}", 1 << 30, {}, inodes) == (None, 0)
        assert worktree._walk_loose(ofd, tid, {}, 1 << 30, 20, io.BytesIO()) == 1  # the tree alone
        sparse = objs / "ab" / ("c" * 38)
        sparse.parent.mkdir(exist_ok=True)
        with open(sparse, "wb") as f:
            f.truncate(250 << 20)
        with pytest.raises(worktree.WorktreeError, match="mostly holes"):
            worktree._read_object(ofd, "ab/" + "c" * 38, 1 << 30, {}, set())
        with pytest.raises(worktree.WorktreeError, match="exceed"):
            worktree._walk_loose(ofd, tid, {}, 0, 20, io.BytesIO())
    finally:
        os.close(ofd)


def test_the_walk_takes_a_bounded_number_of_links_and_refuses_lying_sizes(tmp_path, monkeypatch):
    import io
    import zlib

    objs = tmp_path / "objects"
    def put(kind: bytes, body: bytes, size: bytes | None = None) -> str:
        import hashlib
        raw = kind + b" " + (size or str(len(body)).encode()) + b"\0" + body
        oid = hashlib.sha1(raw).hexdigest()
        (objs / oid[:2]).mkdir(parents=True, exist_ok=True)
        (objs / oid[:2] / oid[2:]).write_bytes(zlib.compress(raw))
        return oid
    tree = put(b"tree", b"".join(b"100644 f%d\0" % i + bytes([i]) * 20 for i in range(50)))
    commit = put(b"commit", f"tree {tree}\n\nx\n".encode())
    ofd = os.open(objs, os.O_RDONLY | os.O_DIRECTORY)
    try:
        dirs: dict = {}
        assert worktree._walk_loose(ofd, commit, dirs, 1 << 30, 20, io.BytesIO()) == 2
        monkeypatch.setattr(worktree, "MAX_LINKS", 10)
        with pytest.raises(worktree.WorktreeError, match="more than 10"):
            worktree._walk_loose(ofd, commit, {}, 1 << 30, 20, io.BytesIO())
        huge = put(b"blob", b"x", size=b"0" * 5000 + b"1")
        assert worktree._walk_loose(ofd, huge, {}, 1 << 30, 20, io.BytesIO()) == 0  # skipped, no ValueError
    finally:
        for fd in dirs.values():
            os.close(fd)
        os.close(ofd)


def test_remove_tree_removes_directories_a_jail_left_unreadable(tmp_path):
    from tmuxjail.paths import remove_tree

    top = tmp_path / "t"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "f").write_text("x")
    (top / "a" / "link").symlink_to(tmp_path)
    os.chmod(top / "a" / "b", 0)
    os.chmod(top / "a", 0o555)
    remove_tree(str(top))
    assert not top.exists() and tmp_path.exists()


def test_links_are_followed_through_the_trees_other_links_as_the_kernel_would(tmp_path):
    """Round three of the red team: chains (.vscode -> conf/editor with conf -> shared; .envrc ->
    env/current -> ../tools/env.sh), a way out and back in (../NAME/tools/env.sh), an absolute
    target inside the repository, and `.` were each followed one hop or not at all."""
    top = str(tmp_path / "repo")
    os.makedirs(top)
    r = worktree._resolved
    links = {".vscode": "conf/editor", "conf": "shared", ".envrc": "env/current", "env/current": "../tools/env.sh"}
    assert r(".vscode", links, top) == "shared/editor"
    assert r(".envrc", links, top) == "tools/env.sh"
    assert r("a/.vscode", {"a/.vscode": ".."}, top) == worktree.ALL
    assert r(".vscode", {".vscode": "."}, top) == worktree.ALL
    assert r(".envrc", {".envrc": "../repo/tools/env.sh"}, top) == "tools/env.sh"
    assert r(".envrc", {".envrc": top + "/tools/env.sh"}, top) == "tools/env.sh"
    assert r(".envrc", {".envrc": "../elsewhere/env.sh"}, top) is None  # out of the repository
    assert r(".envrc", {".envrc": "/etc/profile"}, top) is None
    assert r("x/hooks", {"x": "a/b", "a": "c"}, top) == "c/b/hooks"
    for loop in ({"a": "a"}, {"a": "b", "b": "a"}, {"a": None}, {"a": ""}):
        with pytest.raises(worktree._Unresolvable):
            r("a", loop, top)


def test_a_commit_of_millions_of_header_lines_is_read_without_splitting_it(monkeypatch):
    """Round four of the red team: a 272 KB loose commit inflating to 87 million header lines made
    land and list take 5 GB (the whole body was split into lines) or fail with MemoryError."""
    import tracemalloc

    body = b"tree " + b"a" * 40 + b"\n" + b"x y\n" * 3_000_000 + b"\nmessage\n"
    tracemalloc.start()
    assert worktree._links(b"commit", body, 20) == {bytes.fromhex("a" * 40)}
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 << 20, peak
    monkeypatch.setattr(worktree, "MAX_LINKS", 10)
    with pytest.raises(worktree.WorktreeError, match="more than 10"):
        worktree._links(b"commit", b"".join(b"parent " + b"b" * 40 + b"\n" for _ in range(11)), 20)


def test_a_submodule_pointer_the_landing_changes_needs_trust_files():
    """Round five: a gitlink moved to any commit its URL serves put that commit's .envrc and
    .vscode/ on disk at the next `git submodule update`."""
    changed = [{"status": "M", "path": "lib", "mode": "160000", "old": "160000"},
               {"status": "A", "path": "lib2", "mode": "160000", "old": "000000"}]
    assert [t["entry"] for t in worktree.host_trusted(changed)] == ["submodule", "submodule"]


def test_a_way_back_in_is_resolved_on_the_host_only_while_outside(tmp_path):
    """Round five: realpath followed the links on disk inside the repository too (the branch
    checked out), not those of the branch landed on."""
    top = tmp_path / "repo"
    (top / "x").mkdir(parents=True)
    (top / "z").mkdir()
    (tmp_path / "via").symlink_to(top)
    assert worktree._back_in(str(tmp_path / "via" / "x" / "env.sh"), str(top)) == [".", "x", "env.sh"]
    os.rmdir(top / "x")
    (top / "x").symlink_to("z")  # on disk x -> z; in the tree landed on, x may lead elsewhere
    assert worktree._back_in(str(tmp_path / "repo" / "x" / "env.sh"), str(top)) == [".", "x", "env.sh"]
    assert worktree._back_in(str(tmp_path / "elsewhere" / "a"), str(top)) is None


def test_the_listing_keeps_where_each_entry_came_from():
    out = ("file:/home/u/.gitconfig\0include.path\nwork/r/team.cfg\0file:.git/config\0core.bare\nfalse\0"
           "command line:\0x.y\0")
    plain, entries = gitrun.with_origins(out)
    assert entries == [("/home/u/.gitconfig", "include.path", "work/r/team.cfg"), (".git/config", "core.bare", "false"),
                       ("", "x.y", "")]
    assert plain == "include.path\nwork/r/team.cfg\0core.bare\nfalse\0x.y\n\0"
