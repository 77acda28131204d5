"""The strace argv the launcher puts in front of bubblewrap on a discovery run, and the file
beside the trace that caps its size. Stdlib only: the launcher runs it; discover (trace.py, run.py)
reads what strace wrote and writes the cap, and imports the names from here."""

from __future__ import annotations

import os
import shlex

STRACE = "/usr/bin/strace"
# What is traced: files (open, stat, exec, rename, unlink, ...), processes (fork, exec, exit), the
# cwd, and connect() for network destinations when there is no proxy log.
TRACE_SET = "trace=%file,%process,chdir,fchdir,connect"
CAP_FILE = "trace-cap"  # next to the trace: its size cap in bytes (config [discover] trace_cap)
CAPPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracecap.py")


def argv(trace_file: str, cap: int, python: str) -> list[str]:
    """strace in front of bubblewrap: follow every fork into the jail (-f), hex-escape every
    string (-xx), decorate fds with their paths (-y), show pids as seen outside the jail's PID
    namespace, timestamps for the duration, keep exit lines (-q only drops attach noise). Its
    output goes through tracecap.py, which stops the run at `cap` bytes."""
    pipe = "|exec " + shlex.join([python, "-I", CAPPER, trace_file, str(int(cap))])
    return [STRACE, "-f", "-xx", "-y", "--decode-pids=pidns", "-ttt", "-q", "-s", "256",
            "-e", TRACE_SET, "-o", pipe, "--"]
