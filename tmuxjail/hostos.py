"""Which start path runs here: Linux (bubblewrap) or macOS (Seatbelt), and the sandbox-exec it
runs. Read from sys.platform. The one other way is tmuxjail.testing.darwin, a test entry point
that calls as_darwin() in its own process before the CLI or the launcher runs: nothing in
tmuxjail's command line, config or environment reaches it, so neither a jail nor a stray shell
can swap the sandbox for a stand-in. Stdlib only (the launcher imports it)."""

from __future__ import annotations

import os
import sys

SANDBOX_EXEC = "/usr/bin/sandbox-exec"  # fixed on a Mac: never from PATH, never configurable

_darwin = sys.platform == "darwin"
_seam: str | None = None  # the stand-in sandbox-exec, under tmuxjail.testing.darwin only


def darwin() -> bool:
    """Whether this process takes the macOS start path (Seatbelt)."""
    return _darwin


def seam() -> str | None:
    """The stand-in sandbox-exec when tmuxjail.testing.darwin runs this process, else None."""
    return _seam


def sandbox_exec() -> str:
    return _seam or SANDBOX_EXEC


def as_darwin(stand_in: str) -> None:
    """tmuxjail.testing.darwin only: this process takes the macOS path with `stand_in` as its
    sandbox-exec (an absolute path; whether it is there and runs is the start's to check, as it
    checks /usr/bin/sandbox-exec on a Mac)."""
    global _darwin, _seam
    if not os.path.isabs(stand_in):
        raise SystemExit(f"tmuxjail.testing.darwin: {stand_in!r} is not an absolute path")
    _darwin, _seam = True, stand_in
