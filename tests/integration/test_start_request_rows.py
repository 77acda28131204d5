"""The stored start request, end to end: `tmuxjail start` writes the request column in the format
rows already hold, a resume reads a row written before the request had a type (keys missing that
later versions add), and a row whose request cannot be read is refused in one line (exit 3)."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytestmark = pytest.mark.integration


def request_column(env, name: str) -> str:
    with sqlite3.connect(env.store) as db:
        return db.execute("SELECT request FROM sessions WHERE name = ?", (name,)).fetchone()[0]


def set_request(env, name: str, text: str) -> None:
    with sqlite3.connect(env.store) as db:
        db.execute("UPDATE sessions SET request = ? WHERE name = ?", (text, name))


def test_rows_old_and_new_resume_and_an_unreadable_one_is_refused(jail_env):
    env = jail_env
    env.run("start", "codex", "--mode", "isolated", "--detach", "--name", "app", check=True)
    ws = str(env.ws.resolve())
    assert request_column(env, "app") == json.dumps({  # as commands/start.py wrote it by hand before
        "provider": "codex", "mode": "isolated", "workspaces": [ws], "env_name": "default", "capabilities": [],
        "args": [], "restriction": None, "network": None, "allow_domains": None})
    env.run("stop", "app", check=True)
    set_request(env, "app", json.dumps({"provider": "codex", "mode": "isolated", "workspaces": [ws],
                                        "env_name": "default"}))
    env.run("resume", "app", "--detach", check=True)  # the same policy, from the older row
    env.run("stop", "app", check=True)
    set_request(env, "app", '{"provider": "codex", "mode": "isolated"}')
    got = env.run("resume", "app", "--detach")
    assert got.returncode == 3, got.stderr
    assert "Traceback" not in got.stderr
    first = got.stderr.splitlines()[0]
    assert first == "tmuxjail: app: its stored request cannot be read ('workspaces' is missing)", got.stderr
