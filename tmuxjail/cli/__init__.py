"""The `tmuxjail` command. `--version` answers here with nothing else imported; every other
command line goes to the parser and command table in cli/app.py (the one seam where the rest of
tmuxjail is imported, a command at a time)."""

from __future__ import annotations

import os
import signal
import sys


def run(argv: list[str]) -> int:
    from .app import run as run_app  # seam: the parser and the command table

    return run_app(argv)


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `tmuxjail list | head` ends quietly
    argv = sys.argv[1:]
    if argv in (["--version"], ["-V"]):  # fast path: no argparse, nothing else imported
        from .. import __version__

        print(f"tmuxjail {__version__}")
        raise SystemExit(0)
    leave(run(argv))


def leave(code: int | None) -> None:
    """Exit without tearing the interpreter down. Freeing every module and object of a start
    takes ~15 ms of CPU (8 ms for `list`) after the work is done, while the CLI just started in
    the jail needs that CPU for its own first screen. Nothing is lost: the store commits each
    change as it makes it, the log is line-buffered, atexit's handlers run, and stdout is flushed
    (a failed flush exits 120, as Python's own exit does). A non-daemon thread still running
    (none of ours), or a code that is not a number, gets the ordinary exit."""
    import atexit  # built in: nothing to load

    threading = sys.modules.get("threading")
    waits = threading is not None and any(not t.daemon for t in threading.enumerate()
                                          if t is not threading.main_thread())
    if waits or not isinstance(code, int):
        raise SystemExit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        code = code or 120
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)
