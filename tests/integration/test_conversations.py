"""Each session resumes its own conversation, never another's (issue 28.2): two sessions of one CLI
in one workspace share the CLI's state (a private home, or ~/.codex), so "the latest conversation
of this folder" (`codex resume --last`, `claude -c`, `pi -c`) is as likely the other's. Stand-in
CLIs keep their ids as the real ones do (tests/standins/standin.sh); certify checks the real CLIs."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from conftest import descendants, wait_until

pytestmark = pytest.mark.integration


def start(env, name, provider="codex", mode="isolated"):
    return env.json("start", provider, "--mode", mode, "--workspace", str(env.ws), "--name", name, "--detach")


def report(env, provider="codex"):
    r = env.report(provider)
    env.clear_report(provider)
    return r


def native_id(env, name):
    return env.json("show", name)["native_session_id"]


@pytest.mark.parametrize("mode", ["isolated", "compatibility"])
def test_two_codex_sessions_in_one_workspace_resume_their_own_conversations(jail_env, mode):
    env = jail_env
    start(env, "a", mode=mode)
    a = report(env)["conversation"]
    start(env, "b", mode=mode)  # started later: its conversation is "the latest" of the folder
    b = report(env)["conversation"]
    assert a != b
    assert native_id(env, "a") == a and native_id(env, "b") == b  # learned while each runs
    env.run("stop", "a", check=True)
    env.run("stop", "b", check=True)
    for name, own in (("a", a), ("b", b)):
        out = env.json("resume", name, "--detach")
        r = report(env)
        assert r["conversation"] == own, (name, r["argv"])
        assert r["argv"].endswith(f"--no-daemon resume {own}")
        assert out["native_session_id"] == own and "conversation" not in out
    assert "--last" not in json.dumps(env.json("list", "--all"))


def test_a_conversation_is_learned_at_stop_from_the_file_the_cli_holds_open(jail_env):
    env = jail_env
    start(env, "a")
    a = report(env)["conversation"]
    start(env, "b")
    report(env)
    # Nobody asked for either id while they ran: stop is the moment a's open file says it.
    env.run("stop", "a", check=True)
    assert env.json("show", "a")["native_session_id"] == a


def test_a_dead_cli_with_no_rival_is_resumed_from_its_state(jail_env):
    """The CLI exited by itself (pane dead, no process left): the one conversation of its
    workspace made in its time, when no other session of that workspace ran then."""
    env = jail_env
    info = start(env, "a")
    a = report(env)["conversation"]
    pid = int(env.tmux("display-message", "-p", "-t", info["tmux_pane"], "#{pane_pid}"))
    for p in descendants(pid):
        try:  # a short-lived process of the jail may be gone between the listing and this read
            if Path(f"/proc/{p}/comm").read_text().strip() == "sleep":
                os.kill(p, signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError):
            continue
    wait_until(lambda: env.tmux("display-message", "-p", "-t", info["tmux_pane"], "#{pane_dead}").strip() == "1")
    env.json("resume", "a", "--detach")
    assert report(env)["conversation"] == a


def test_two_dead_clis_of_one_workspace_start_new_conversations_rather_than_guess(jail_env):
    env = jail_env
    ids = set()
    for name in ("a", "b"):
        start(env, name)
        ids.add(report(env)["conversation"])
    env.kill()  # as after a reboot: nothing asked for either id while they ran
    proc = env.run("resume", "a", "--detach")
    assert proc.returncode == 0, proc.stderr
    assert "no conversation of its own was recorded" in proc.stdout
    r = report(env)
    assert r["conversation"] not in ids and "resume" not in r["argv"].split()


@pytest.mark.parametrize("provider,cli", [("claude-code", "claude"), ("pi", "pi")])
def test_claude_and_pi_get_their_conversation_up_front_and_resume_exactly_it(jail_env, provider, cli):
    env = jail_env
    start(env, "a", provider)
    a = report(env, cli)["conversation"]
    start(env, "b", provider)
    b = report(env, cli)["conversation"]
    assert a != b and a != "none"
    assert native_id(env, "a") == a
    for n in ("a", "b"):
        env.run("stop", n, check=True)
    env.json("resume", "a", "--detach")
    r = report(env, cli)
    assert r["conversation"] == a
    assert "--continue" not in r["argv"]
    if provider == "pi":  # in Pi's own directory for this cwd, so `pi -r` lists it too
        mangled = str(env.ws).lstrip("/").replace("/", "-")
        assert f"/.pi/agent/sessions/--{mangled}--/tmuxjail-{a}.jsonl" in r["argv"]


def test_a_claude_conversation_that_never_began_is_started_again_with_its_id(jail_env):
    """`claude --resume <id>` fails when no conversation of that id was written (Claude writes it at
    the first message): resume then starts one with the same id instead."""
    env = jail_env
    info = start(env, "a", "claude-code")
    a = report(env, "claude")["conversation"]
    env.run("stop", "a", check=True)
    mangled = "".join(c if c.isalnum() and c.isascii() else "-" for c in str(env.ws))
    transcript = Path(info["private_home"], ".claude", "projects", mangled, f"{a}.jsonl")
    assert transcript.exists()  # as the stand-in wrote it, where Claude does
    transcript.unlink()
    out = env.json("resume", "a", "--detach")
    r = report(env, "claude")
    assert r["argv"].split()[-2:] == ["--session-id", a] and "--resume" not in r["argv"]
    assert out["conversation"] == "new" and out["native_session_id"] == a
