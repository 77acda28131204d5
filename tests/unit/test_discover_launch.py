"""The launcher's side of discovery: strace in front of bubblewrap, writing only a new trace file
inside the store's discover/ directory."""

from __future__ import annotations

import os

import pytest

from tmuxjail import launch


def spec(tmp_path, trace):
    return {"store": str(tmp_path / "state" / "store.db"), "trace": trace}


@pytest.fixture
def state(tmp_path):
    d = tmp_path / "state" / "discover" / "codex-ws-1"
    d.mkdir(parents=True)
    return d


def test_a_discovery_trace_is_created_new_and_private(tmp_path, state):
    argv = launch.traced(spec(tmp_path, str(state / "trace")))
    assert argv[0] == "/usr/bin/strace" and argv[-3:] == ["-o", str(state / "trace"), "--"]
    assert "-xx" in argv and "-f" in argv
    assert (state / "trace").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("where", ["/tmp/trace", "{state}/../../x/trace", "{state}/other", "{state}/trace/trace",
                                   "{tmp}/elsewhere/discover/x/trace", "{state}/../trace"])
def test_a_trace_anywhere_else_is_refused(tmp_path, state, where):
    path = where.format(state=state, tmp=tmp_path)
    with pytest.raises(SystemExit) as exc:
        launch.traced(spec(tmp_path, path))
    assert exc.value.code == launch.EXIT_REFUSED


def test_an_existing_trace_or_link_is_refused(tmp_path, state):
    os.symlink(tmp_path / "victim", state / "trace")
    with pytest.raises(SystemExit) as exc:
        launch.traced(spec(tmp_path, str(state / "trace")))
    assert exc.value.code == launch.EXIT_UNAVAILABLE
    assert not (tmp_path / "victim").exists()
