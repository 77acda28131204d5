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
# ASCII: a letter matches its ASCII case pair only (the footers are ASCII), as in SCREEN_SEARCH.
_FLAGS = re.IGNORECASE | re.ASCII
WORKING = {
    "codex": re.compile(r"esc to interrupt|working \(\d|\bworking\b.*\besc\b", _FLAGS),
    "claude-code": re.compile(r"esc to interrupt|\(\d+s\s*[·•]", _FLAGS),
    "cursor": re.compile(r"ctrl\+c to stop|esc to (stop|interrupt)|\bgenerating\b", _FLAGS),
    "pi": re.compile(r"esc to (interrupt|abort)|\bworking\.\.\.", _FLAGS),
}
GENERIC = re.compile(r"esc to interrupt|ctrl\+c to (stop|interrupt)", _FLAGS)
# What tmux searches every pane's visible screen for, in the one list-panes of `list` (a POSIX
# extended regular expression, case-insensitive, line by line). It matches wherever any pattern
# above does (each of them needs one of these on a single line), so a screen with no line that
# matches it reads as waiting without being captured; a screen that has one is captured and read
# with the patterns above. tests/unit/test_activity.py checks the superset over samples.
SCREEN_SEARCH = r"esc to (interrupt|stop|abort)|working|ctrl\+c to (stop|interrupt)|\([0-9]+s|generating"
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "tcsh", "csh", "nu", "xonsh"})


def needs_screen(provider: str, kind: str, screen_hit: str) -> bool:
    """Whether guess() must see the pane's screen: tmux's SCREEN_SEARCH found a line ("0": none,
    so no pattern can match; anything else, or nothing from an older tmux: capture it)."""
    return provider != "shell" and kind == "agent" and screen_hit != "0"


def guess(provider: str, screen: str, foreground: str, kind: str = "agent") -> str:
    """"working" or "waiting"."""
    if provider == "shell" or kind == "shell":
        return "waiting" if foreground in SHELLS or not foreground else "working"
    pattern = WORKING.get(provider, GENERIC)
    visible = "\n".join(screen.splitlines()[-12:])  # the footer lives at the bottom
    return "working" if pattern.search(visible) else "waiting"
