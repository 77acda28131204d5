"""The discovery trace's size cap: strace writes into a pipe (`-o "|..."`) and this script, run by
path with `python -I`, copies whole lines into the trace file. Past the cap it writes one marker
line (`tmuxjail-trace-cap BYTES`, which no strace line can look like: strace's lines start with a
pid) and ends the run by killing strace: bubblewrap dies with its parent (--die-with-parent) and
the jail with it. A CLI that floods the trace can fill it only up to the cap, and what it did
after is marked missing, never silently dropped. Stdlib only.

    python -I tracecap.py TRACE_FILE CAP_BYTES"""

from __future__ import annotations

import os
import signal
import sys

MARK = b"tmuxjail-trace-cap "
MAX_PENDING = 1 << 20  # a line longer than this is not strace's (it is dropped, not buffered)


def _write(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def _stop_run() -> None:
    """Kill strace (our parent) and with it the jail; if our parent is not strace, stop reading:
    strace then blocks on the full pipe and every traced process at its next system call."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/comm", "rb") as f:
            comm = f.read().strip()
    except OSError:
        comm = b""
    if comm == b"strace":
        os.kill(parent, signal.SIGKILL)
        while os.read(0, 1 << 16):  # until the pipe closes
            pass
        return
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        signal.pause()


def copy(src: int, dst: int, cap: int) -> bool:
    """Copy whole lines from src to dst until EOF (False) or until the next line would pass
    `cap` bytes (True: the marker is written)."""
    written, pending = 0, b""
    while chunk := os.read(src, 1 << 16):
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        lines, pending = data[:cut], data[cut:]
        if len(pending) > MAX_PENDING:
            pending = b""
        if written + len(lines) > cap:
            room = lines[:cap - written]
            _write(dst, room[:room.rfind(b"\n") + 1])
            _write(dst, MARK + str(cap).encode() + b"\n")
            return True
        _write(dst, lines)
        written += len(lines)
    _write(dst, pending)
    return False


def main(argv: list[str]) -> int:
    path, cap = argv[1], int(argv[2])
    # A stop hangs the pane up: keep copying until strace has written its last line and closed.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    if copy(0, fd, cap):
        os.close(fd)
        _stop_run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
