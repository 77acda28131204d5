"""ahead.py: work a start begins in a child process. Its answer is the work's own answer; a child
that fails or answers something else is no answer (the caller then does the work itself). The
audit's snapshot taken ahead is the snapshot taken in-process, timed before its walk began."""

from __future__ import annotations

import json
import os
import time

import pytest

from tmuxjail import ahead, audit
from tmuxjail.store import Store


def _value(x):
    return {"x": x, "l": [1, "two"], "t": ("a",)}


def _die(code):
    os._exit(code)


def _raise():
    raise RuntimeError("no")


def test_the_childs_answer_is_the_works_answer():
    child = ahead.start(_value, 3)
    assert child is not None and child.result() == _value(3)


@pytest.mark.parametrize("fn,args", [(_die, (3,)), (_die, (0,)), (_raise, ()), (object, ())],
                         ids=["exits-3", "exits-0-without-answer", "raises", "unmarshalable"])
def test_a_child_that_fails_is_no_answer(fn, args):
    child = ahead.start(fn, *args)
    assert child is not None and child.result() is None


def _workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    hook = ws / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    (ws / ".envrc").write_text("export X=1\n")
    for i in range(30):
        (ws / "node_modules" / f"p{i}").mkdir(parents=True)
    return str(ws)


def _base(store, sid):
    return json.loads(store.db.execute("SELECT data FROM events WHERE session_id=? AND kind='audit-base'",
                                       (sid,)).fetchone()[0])


def test_the_snapshot_ahead_is_the_snapshot(tmp_path):
    ws = _workspace(tmp_path)
    store = Store(tmp_path / "store.db")
    here = audit.snapshot([ws])
    assert here["ids"] and here["entries"] > 30
    before = time.time_ns()
    audit.snapshot_ahead([ws])
    after = time.time_ns()
    got = audit.baseline(store, "s1", [ws])
    assert audit._AHEAD is None  # taken once
    assert (got["ids"], got["entries"], got["capped"]) == (here["ids"], here["entries"], here["capped"])
    assert before <= got["since_ns"] <= after  # the time before its walk began, not when it was taken
    assert _base(store, "s1")["ids"] == here["ids"]


def test_a_snapshot_of_other_roots_or_a_failed_child_is_walked_again(tmp_path, monkeypatch):
    ws = _workspace(tmp_path)
    store = Store(tmp_path / "store.db")
    want = audit.snapshot([ws])["ids"]
    audit.snapshot_ahead([str(tmp_path)])  # other roots
    mark = time.time_ns()
    got = audit.baseline(store, "s2", [ws])
    assert got["ids"] == want and got["since_ns"] >= mark
    parent = os.getpid()
    real = audit.snapshot
    monkeypatch.setattr(audit, "snapshot", lambda r: os._exit(1) if os.getpid() != parent else real(r))
    audit.snapshot_ahead([ws])
    mark = time.time_ns()
    got = audit.baseline(store, "s3", [ws])
    assert got["ids"] == want and got["since_ns"] >= mark


def test_no_child_to_be_had_means_the_work_is_done_here(tmp_path, monkeypatch):
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert ahead.start(_value, 1) is None
    ws = _workspace(tmp_path)
    audit.snapshot_ahead([ws])  # a start under a process limit: no child, and no error
    got = audit.baseline(Store(tmp_path / "store.db"), "s4", [ws])
    assert got["ids"] == audit.snapshot([ws])["ids"]
    from tmuxjail import host

    host.root_only_ahead((str(tmp_path),))
    assert host.root_only_walked((str(tmp_path),)) == host.root_only((str(tmp_path),))


def test_a_walk_not_wanted_is_killed_and_reaped():
    child = ahead.start(time.sleep, 30)
    assert child is not None
    t0 = time.monotonic()
    child.cancel()
    assert time.monotonic() - t0 < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped: no zombie left
