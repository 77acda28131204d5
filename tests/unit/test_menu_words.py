"""What may go into a tmux command string tmuxjail builds (menu.py): plain words only, checked,
never escaped; labels and prompts without `#` or control characters; ids of a strict shape."""

from __future__ import annotations

import pytest

from tmuxjail import menu
from tmuxjail.errors import TmuxjailError, UsageError


@pytest.mark.parametrize("bad", ["#(touch x)", "#{pane_id}", "a;b", "a\"b", "a'b", "$HOME", "~/x", "a\\b",
                                 "a\nb", "{x}", "a`b`"])
def test_word_refuses_what_tmux_or_the_shell_would_interpret(bad):
    with pytest.raises(TmuxjailError):
        menu.word(bad)


def test_word_takes_ids_paths_and_options():
    for ok in ("/usr/bin/python3", "-E", "%12", "/dev/pts/3", "sha256:ab", "3f2a-11", "/tmp/tmux-0/x y"):
        assert menu.word(ok) == ok


def test_ids_and_labels():
    menu.check_ids("/dev/pts/3", "%0")
    menu.check_ids("client-1234", None)
    for client, pane in (("/dev/pts/3;kill-server", None), (None, "%1 ; x"), (None, "#{pane_id}"), ("a b", None)):
        with pytest.raises(UsageError):
            menu.check_ids(client, pane)
    assert menu.label("stop #(x)\n{y}") == "stop ?(x)?{y}"
