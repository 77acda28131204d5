"""host.root_only_ahead: the root-only walk of /etc and /opt, run in a child process while the
start's code loads, answers exactly what the walk in-process answers, and anything wrong with the
child means the walk runs again in-process (never fewer masks)."""

from __future__ import annotations

import os

from tmuxjail import host


def _tree(tmp_path) -> tuple[str, ...]:
    root = tmp_path / "etc"
    (root / "ssl" / "private").mkdir(parents=True)
    (root / "ssl" / "private" / "key.pem").write_text("k")
    (root / "ssl" / "private").chmod(0o700)  # not entered: listed as a dir
    (root / "shadow").write_text("s")
    (root / "shadow").chmod(0o640)
    (root / "hosts").write_text("h")
    (root / "hosts").chmod(0o644)
    (root / "link").symlink_to(root / "shadow")  # never followed, never listed
    (root / "sub").mkdir()
    (root / "sub" / "secret").write_text("x")
    (root / "sub" / "secret").chmod(0o600)
    return (str(root), str(tmp_path / "missing"))


def test_the_walk_ahead_is_the_walk(tmp_path):
    roots = _tree(tmp_path)
    want = host.root_only(roots)
    assert want == ((f"{roots[0]}/shadow", f"{roots[0]}/sub/secret"), (f"{roots[0]}/ssl/private",))
    host.root_only_ahead(roots)
    assert host.root_only_walked(roots) == want
    assert host._AHEAD is None  # taken once: the next start walks again


def test_a_child_that_fails_or_lies_means_the_walk_runs_here(tmp_path, monkeypatch):
    roots = _tree(tmp_path)
    want = host.root_only(roots)
    parent = os.getpid()
    real = host.root_only
    for child in (lambda r: os._exit(3), lambda r: ([1], []), lambda r: "not a pair", lambda r: 1 / 0):
        monkeypatch.setattr(host, "root_only", lambda r, child=child: child(r) if os.getpid() != parent else real(r))
        host.root_only_ahead(roots)
        assert host.root_only_walked(roots) == want
    # A walk started for other roots is not this one's answer.
    monkeypatch.setattr(host, "root_only", real)
    other = (f"{roots[0]}/sub",)
    assert host.root_only(other) != want
    host.root_only_ahead(other)
    assert host.root_only_walked(roots) == want
