"""The early pane (sessions/early.py): a start of a request that started before opens its pane on
the fingerprint it resolved to last time, then resolves. Used only when the request resolves to
exactly that; otherwise, and on any failure before its spec, that pane is killed and nothing of it
is left: no tmux session, no spool file, no store row. Real tmux, real bubblewrap."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tmuxjail.pane.command import kind

pytestmark = pytest.mark.integration

START = ("start", "codex", "--mode", "isolated", "--detach")


def hints(env) -> list[Path]:
    d = env.state_dir / "hints"
    return sorted(d.glob("*.json")) if d.is_dir() else []


def events(env, name: str) -> list[dict]:
    log = env.state_dir / "tmuxjail.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def sessions(env) -> set[str]:
    return set(env.tmux("list-sessions", "-F", "#{session_name}", check=False).split())


def spool_left(env) -> list[str]:
    spool = env.state_dir / "spool"
    return sorted(os.listdir(spool)) if spool.is_dir() else []


def started(env, *extra: str) -> dict:
    return env.json(*START, *extra)


def test_a_repeated_start_opens_its_pane_first_and_runs_the_same_jail(jail_env):
    env = jail_env
    first = started(env)
    assert not events(env, "early_pane")  # nothing to go on yet: the first start writes the hint
    [hint] = hints(env)
    assert json.loads(hint.read_text()) == {"fp": first["fingerprint"], "shown": "isolated", "mode": "isolated"}
    assert hint.stat().st_mode & 0o777 == 0o600 and hint.parent.stat().st_mode & 0o777 == 0o700
    second = started(env, "--name", "again")
    assert second["fingerprint"] == first["fingerprint"]
    assert [e["session"] for e in events(env, "early_pane")] == ["again"]
    assert not events(env, "early_pane_killed")
    rows = {r["name"]: r for r in env.json("list")}
    assert rows["again"]["status"] == "running" and rows["again"]["fingerprint"] == first["fingerprint"]
    start_cmd = env.tmux("display-message", "-p", "-t", "=again:", "#{pane_start_command}")
    assert kind(start_cmd, first["fingerprint"]) == "agent"
    assert env.tmux("show-options", "-v", "-t", "=again:", "@tmuxjail_id").strip() == rows["again"]["id"]
    assert env.tmux("show-hooks", "-w", "-t", "=again:", "pane-died").strip()  # the audit hook, as on any start
    assert spool_left(env) == []  # the spec read and deleted, its marker gone, no temp file
    assert env.report().get("argv")  # the jailed stand-in ran


def test_a_request_that_now_resolves_otherwise_kills_the_early_pane(jail_env):
    env = jail_env
    first = started(env, "--name", "one")
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("[limits]\nnofile = 500\n")  # a new policy, same request
    second = started(env, "--name", "two")
    assert second["fingerprint"] != first["fingerprint"]
    [killed] = events(env, "early_pane_killed")
    assert killed["hinted"] == first["fingerprint"] and killed["resolved"] == second["fingerprint"]
    assert sessions(env) == {"one", "two"}  # the early one went before `two` was made
    start_cmd = env.tmux("display-message", "-p", "-t", "=two:", "#{pane_start_command}")
    assert kind(start_cmd, second["fingerprint"]) == "agent" and first["fingerprint"] not in start_cmd
    assert spool_left(env) == []
    [hint] = hints(env)
    assert json.loads(hint.read_text())["fp"] == second["fingerprint"]  # the next start guesses right


def test_a_start_that_fails_after_the_early_pane_leaves_nothing(jail_env):
    env = jail_env
    started(env, "--name", "one")
    (env.bin / "codex").unlink()  # the request now fails while resolving, after its pane opened
    proc = env.run(*START, "--name", "two")
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) <= 2 and "Traceback" not in proc.stderr
    assert sessions(env) == {"one"}
    assert spool_left(env) == []
    assert [r["name"] for r in env.json("list", "--all")] == ["one"]


def test_a_name_taken_in_tmux_is_refused_and_that_session_is_left_alone(jail_env):
    env = jail_env
    started(env, "--name", "one")
    env.tmux("new-session", "-d", "-s", "mine", "sleep", "600")
    proc = env.run(*START, "--name", "mine")
    assert proc.returncode != 0 and "already exists" in proc.stderr
    assert env.tmux("display-message", "-p", "-t", "=mine:", "#{pane_start_command}").strip() == "sleep 600"
    assert spool_left(env) == []


@pytest.mark.parametrize(("planted", "opened"), [
    ({"fp": "sha256:" + "0" * 64, "shown": "isolated", "mode": "isolated"}, True),  # well formed, wrong
    ({"fp": "sha256:" + "0" * 64, "shown": "isolated", "mode": "verified"}, False),  # never opened for verified
    ({"fp": "sha256:x; run-shell id", "shown": "isolated", "mode": "isolated"}, False),  # not a fingerprint
    ({"fp": "sha256:" + "0" * 64, "shown": "isolated\"; kill-server", "mode": "isolated"}, False),
    ("not json {", False),
])
def test_a_planted_hint_runs_nothing_it_names(jail_env, planted, opened):
    """The hints live in the state directory, which no jail sees; one written there anyway (by
    anything of the user's) can only cost a killed pane: the launcher runs what the policy the
    request resolves to says, or nothing."""
    env = jail_env
    first = started(env, "--name", "one")
    [hint] = hints(env)
    hint.write_text(planted if isinstance(planted, str) else json.dumps(planted))
    second = started(env, "--name", "two")
    assert second["fingerprint"] == first["fingerprint"]
    assert sessions(env) == {"one", "two"}
    start_cmd = env.tmux("display-message", "-p", "-t", "=two:", "#{pane_start_command}")
    assert kind(start_cmd, first["fingerprint"]) == "agent"
    killed = [e["hinted"] for e in events(env, "early_pane_killed")]
    assert killed == (["sha256:" + "0" * 64] if opened else [])
    assert spool_left(env) == []


@pytest.mark.parametrize("mode", ["compatibility", "isolated"])
def test_a_jail_cannot_reach_the_hints(jail_env, mode):
    """From inside a real jail: the hints directory (under the state directory) is not there to
    write, so no agent can point its user's next start at a pane of its choosing."""
    env = jail_env
    env.json("start", "codex", "--mode", mode, "--detach", "--name", "one")
    [hint] = hints(env)
    before = hint.read_text()
    env.clear_report()
    env.json("start", "codex", "--mode", mode, "--detach", "--name", "two", "--", "--outside", str(hint))
    deadline = time.monotonic() + 10  # the stand-in writes its report line by line
    while "write-outside" not in (report := env.report()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert report["write-outside"] == "denied"
    assert hint.read_text() == before
