"""The macOS platform seam: run tmuxjail's normal CLI, on this (Linux) machine, with the platform
facts of a Mac and a stand-in sandbox-exec:

    python -m tmuxjail.testing.darwin --sandbox-exec PATH [tmuxjail's own arguments]

The CLI takes the Darwin start path (hostos.darwin()): tmuxjail's directories as platformdirs
lays them out on macOS (~/Library/Application Support/tmuxjail), the Seatbelt backend, the
session's proxy on loopback TCP, and a pane whose launcher (started through `launch` below, so it
too runs with these facts) execs PATH in place of /usr/bin/sandbox-exec, with the profile, its
parameters and the CLI. This is the only switch: the `tmuxjail` command, its config and its
environment have none. What it proves and what only a Mac can: docs/macos.md."""

from __future__ import annotations

import sys

from .. import hostos

USAGE = "usage: python -m tmuxjail.testing.darwin --sandbox-exec PATH [tmuxjail arguments]"


def _seam(argv: list[str]) -> list[str]:
    if len(argv) < 2 or argv[0] != "--sandbox-exec":
        raise SystemExit(USAGE)
    hostos.as_darwin(argv[1])
    return argv[2:]


def main(argv: list[str]) -> None:
    rest = _seam(argv)
    from ..cli import main as cli_main

    sys.argv = ["tmuxjail", *rest]
    cli_main()


def launch(argv: list[str]) -> None:
    """The pane's launcher under the seam (pane/command.py builds its command line)."""
    rest = _seam(argv)
    from ..pane.launch import main as launch_main

    launch_main(rest)


if __name__ == "__main__":
    main(sys.argv[1:])
