"""The `tmuxjail` command. `--version` answers here with nothing else imported; every other
command line goes to the parser and command table in cli/app.py (the one seam where the rest of
tmuxjail is imported, a command at a time)."""

from __future__ import annotations

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
    raise SystemExit(run(argv))
