"""Is the CLI in a pane working, or waiting for the user? A guess from what the pane shows.

Read from the visible screen (`capture-pane`, no history), with per-provider patterns of the
"busy" footer each CLI prints while it runs a turn. Limits (see README): the CLIs change these
strings between versions; a turn that prints nothing for a moment still shows its footer, but a
CLI that hides it (a custom status line, a narrow pane that truncates it) reads as waiting; a
prompt that asks for approval reads as waiting, which is what it is. For the `shell` provider and
shells inside a jail the foreground process decides: the shell itself means waiting.
Stdlib only, pure: `list` calls it for every running pane.
"""

from __future__ import annotations

import re

# Footers seen while a turn runs. Kept loose on purpose: case-insensitive, spinner glyphs optional.
WORKING = {
    "codex": re.compile(r"esc to interrupt|working \(\d|\bworking\b.*\besc\b", re.IGNORECASE),
    "claude-code": re.compile(r"esc to interrupt|\(\d+s\s*[·•]", re.IGNORECASE),
    "cursor": re.compile(r"ctrl\+c to stop|esc to (stop|interrupt)|\bgenerating\b", re.IGNORECASE),
    "pi": re.compile(r"esc to (interrupt|abort)|\bworking\.\.\.", re.IGNORECASE),
}
GENERIC = re.compile(r"esc to interrupt|ctrl\+c to (stop|interrupt)", re.IGNORECASE)
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "tcsh", "csh", "nu", "xonsh"})


def guess(provider: str, screen: str, foreground: str, kind: str = "agent") -> str:
    """"working" or "waiting"."""
    if provider == "shell" or kind == "shell":
        return "waiting" if foreground in SHELLS or not foreground else "working"
    pattern = WORKING.get(provider, GENERIC)
    visible = "\n".join(screen.splitlines()[-12:])  # the footer lives at the bottom
    return "working" if pattern.search(visible) else "waiting"
