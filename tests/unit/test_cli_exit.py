"""cli.leave: the command exits without tearing the interpreter down, and loses nothing doing so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROLOGUE = """
import atexit, sys
from tmuxjail.cli import leave
atexit.register(lambda: print("atexit ran", file=sys.stderr))
"""


# stdout buffered as a user's is (PYTHONUNBUFFERED would hide a missing flush)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def run(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROLOGUE + body], capture_output=True, text=True, timeout=30,
                          env=ENV)


@pytest.mark.parametrize("code", [0, 3, 130])
def test_the_code_and_buffered_output_survive(code):
    # stdout is a pipe: block-buffered, so only the flush in leave() brings this out
    p = run(f"print('x' * 5000, end=''); sys.stdout.write('done'); leave({code}); print('after')")
    assert p.returncode == code
    assert p.stdout == "x" * 5000 + "done"
    assert p.stderr == "atexit ran\n"


def test_the_interpreter_is_not_torn_down():
    # an object whose teardown would print: os._exit skips it, where SystemExit would not
    body = "class T:\n    def __del__(self): print('torn down', file=sys.stderr)\nkeep = T()\nleave(0)"
    assert run(body).stderr == "atexit ran\n"
    assert "torn down" in run(body.replace("leave(0)", "raise SystemExit(0)")).stderr


def test_a_failed_flush_exits_120_as_python_does():
    r, w = os.pipe()
    os.close(r)  # nobody reads: the flush fails (SIGPIPE is ignored, as Python starts)
    try:
        p = subprocess.run([sys.executable, "-c", PROLOGUE + "print('lost'); leave(0)"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=30, env=ENV)
    finally:
        os.close(w)
    assert (p.returncode, p.stderr) == (120, "atexit ran\n")


def test_a_running_thread_or_odd_code_gets_the_ordinary_exit():
    body = ("import threading, time\n"
            "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\nleave(4)")
    p = run(body)
    assert (p.returncode, p.stdout) == (4, "thread done\n")
    p = run("leave(None)")
    assert p.returncode == 0


@pytest.mark.parametrize("kept", [True, False], ids=["store-alive-at-exit", "store-dropped-before"])
def test_the_store_is_closed_and_its_wal_folded_in(tmp_path, kept):
    # A connection and its statement cache form a cycle: without the store closing it, the
    # writes would stay in store.db-wal (os._exit runs no cycle collector).
    db = tmp_path / "store.db"
    body = (f"from tmuxjail.store import Store\ns = Store(__import__('pathlib').Path({str(db)!r}))\n"
            "s.event('test', None, n=1)\n" + ("" if kept else "del s\n") + "leave(0)")
    p = run(body)
    assert p.returncode == 0, p.stderr
    assert db.stat().st_size > 4096  # the tables and the event are in the file itself
    assert not (tmp_path / "store.db-wal").exists()
