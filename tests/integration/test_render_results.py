"""`menu` and `discover` return their results through the one renderer (render.Result) like every
other command: the same text as before, and JSON with --json."""

from __future__ import annotations

import json
import shlex

import pytest

pytestmark = pytest.mark.integration


def test_menu_print_json_is_the_printed_command(env):
    env.tmux("-f", "/dev/null", "new-session", "-d", "-s", "x", "-c", str(env.ws))
    for action in ("start", "list"):
        text = env.run("menu", action, "-t", "%0", "--print", check=True).stdout
        data = json.loads(env.run("menu", action, "-t", "%0", "--print", "--json", check=True).stdout)
        assert list(data) == ["command"] and data["command"][:2] == ["tmux", "-S"]
        assert text == shlex.join(data["command"]) + "\n"


def test_discover_list_text_and_json(env):
    assert env.run("discover", "list", check=True).stdout == "no discoveries\n"
    assert json.loads(env.run("discover", "list", "--json", check=True).stdout) == []
