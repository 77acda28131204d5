"""The launcher's side of discovery: strace in front of bubblewrap, writing only a new trace file
inside the store's discover/ directory."""

from __future__ import annotations

import os
import shlex
import sys

import pytest

from tmuxjail.discover import trace
from tmuxjail.pane import launch, refuse, strace, tracecap


def spec(tmp_path, trace):
    return {"store": str(tmp_path / "state" / "store.db"), "trace": trace}


@pytest.fixture
def state(tmp_path):
    d = tmp_path / "state" / "discover" / "codex-ws-1"
    d.mkdir(parents=True)
    (d / "trace-cap").write_text(str(3 << 20))
    return d


def test_a_discovery_trace_is_created_new_and_private(tmp_path, state):
    argv = launch.traced(spec(tmp_path, str(state / "trace")))
    assert argv[0] == "/usr/bin/strace" and argv[-3] == "-o" and argv[-1] == "--"
    # strace writes into tracecap.py, which writes the trace file and stops the run at the cap
    pipe = shlex.split(argv[-2][1:])
    assert pipe[:2] == ["exec", sys.executable] and pipe[-3:] == [strace.CAPPER, str(state / "trace"), str(3 << 20)]
    assert "-xx" in argv and "-f" in argv
    assert (state / "trace").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("cap", [None, "", "lots", "-1", "0"])
def test_a_missing_or_bad_trace_cap_is_refused(tmp_path, state, cap):
    (state / "trace-cap").unlink()
    if cap is not None:
        (state / "trace-cap").write_text(cap)
    with pytest.raises(SystemExit) as exc:
        launch.traced(spec(tmp_path, str(state / "trace")))
    assert exc.value.code == refuse.EXIT_REFUSED


def test_the_capper_keeps_whole_lines_up_to_the_cap_then_marks_it(tmp_path):
    out = tmp_path / "trace"
    out.write_bytes(b"")
    lines = b"".join(b"%d 1.0 stat(\"x\") = -1 ENOENT (No such file or directory)\n" % i for i in range(5000))
    src = tmp_path / "src"
    src.write_bytes(lines)
    cap = 100_000
    with open(src, "rb") as i, open(out, "r+b") as o:
        assert tracecap.copy(i.fileno(), o.fileno(), cap) is True
    got = out.read_bytes()
    body, mark = got[:-len(f"tmuxjail-trace-cap {cap}\n")], got[-len(f"tmuxjail-trace-cap {cap}\n"):]
    assert mark == f"tmuxjail-trace-cap {cap}\n".encode() and len(body) <= cap and body.endswith(b"\n")
    assert lines.startswith(body) and len(body) > cap - 200
    t = trace.parse(got.decode().splitlines(True))
    assert t.truncated and t.cap == cap
    small = tmp_path / "small"
    small.write_bytes(b"")
    with open(src, "rb") as i, open(small, "r+b") as o:
        assert tracecap.copy(i.fileno(), o.fileno(), len(lines)) is False
    assert small.read_bytes() == lines


@pytest.mark.parametrize("where", ["/tmp/trace", "{state}/../../x/trace", "{state}/other", "{state}/trace/trace",
                                   "{tmp}/elsewhere/discover/x/trace", "{state}/../trace"])
def test_a_trace_anywhere_else_is_refused(tmp_path, state, where):
    path = where.format(state=state, tmp=tmp_path)
    with pytest.raises(SystemExit) as exc:
        launch.traced(spec(tmp_path, path))
    assert exc.value.code == refuse.EXIT_REFUSED


def test_an_existing_trace_or_link_is_refused(tmp_path, state):
    os.symlink(tmp_path / "victim", state / "trace")
    with pytest.raises(SystemExit) as exc:
        launch.traced(spec(tmp_path, str(state / "trace")))
    assert exc.value.code == refuse.EXIT_UNAVAILABLE
    assert not (tmp_path / "victim").exists()
