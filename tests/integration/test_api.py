"""tmuxjail.api, as an orchestrator that drives agents with libtmux uses it: on libtmux's own
pytest fixtures (`server`: a private -L socket per test, killed afterwards), with real bubblewrap
jails and the stand-in CLIs. The example in docs/api.md runs here as written (only its socket renamed)."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path

import libtmux
import pytest
from conftest import LIBTMUX_OBJECTS, wait_until

from tmuxjail import api, paths

pytestmark = [pytest.mark.integration, LIBTMUX_OBJECTS]
API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.fixture
def orchestrator(jail_env, server, monkeypatch):
    """This process as an orchestrator: a private HOME/XDG tree, the stand-in CLIs on PATH, the
    workspace as cwd, no $TMUX; and libtmux's `server` fixture, never the default server."""
    assert server.socket_name and server.socket_name.startswith("libtmux_test"), server.socket_name
    assert server.socket_path is None
    wanted = jail_env.environ()
    for k in list(os.environ):
        if k not in wanted:
            monkeypatch.delenv(k)
    for k, v in wanted.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(jail_env.ws)
    monkeypatch.setenv("PWD", str(jail_env.ws))
    jail_env.server = server
    paths.get.cache_clear()  # tmuxjail's paths are per process (HOME does not change under it)
    yield jail_env
    paths.get.cache_clear()




def test_start_returns_libtmux_objects_to_keep_going_with(orchestrator):
    env, server = orchestrator, orchestrator.server
    jail = api.start("codex", workspace=env.ws, mode="isolated", name="agent1", server=server,
                     args=["--outside", str(env.outside / "x")])
    assert isinstance(jail, api.Jail) and jail.status == "running" and jail.mode == "isolated"
    assert jail.fingerprint and jail.fingerprint.startswith("sha256:")
    assert isinstance(jail.session, libtmux.Session) and isinstance(jail.pane, libtmux.Pane)
    assert jail.session.name == "agent1" and jail.pane.pane_id == jail.pane_id
    report = env.report()
    assert report["write-workspace"] == "ok" and report["write-outside"] == "denied"  # really jailed
    # The orchestrator's own Server object sees the same session; the objects keep working.
    assert server.has_session("agent1")
    assert jail.pane.display_message("#{@tmuxjail_fp}", get_text=True) == [jail.fingerprint]
    assert jail.pane.pane_current_command  # libtmux refreshes it through tmuxjail's Server
    with pytest.raises(TypeError):
        jail.record["status"] = "x"  # type: ignore[index]  # read-only, as the whole result


def test_a_jailed_shell_driven_with_send_keys(orchestrator):
    env = orchestrator
    jail = api.start("shell", workspace=env.ws, mode="isolated", server=env.server)
    assert jail.pane is not None
    jail.pane.send_keys(f"echo inside > {env.ws}/in.txt; echo escaped > {env.outside}/out.txt")
    assert wait_until(lambda: (env.ws / "in.txt").exists(), 15)
    time.sleep(0.3)
    assert not (env.outside / "out.txt").exists()


def test_list_stop_resume_and_typed_errors(orchestrator):
    env, server = orchestrator, orchestrator.server
    a = api.start("codex", workspace=env.ws, name="a", server=server, mode="isolated")
    listed = {j.name: j for j in api.list(server=server)}
    assert set(listed) == {"a"} and listed["a"].status == "running" and listed["a"].pane is not None
    assert api.list(socket_name=env.socket) == []  # another server: none of its jails

    assert api.resume("a").status == "running"  # live: nothing is started twice
    stopped = api.stop("a")
    assert stopped.status == "stopped" and stopped.pane is None and stopped.session is None
    assert not server.has_session("a")
    assert api.list(server=server) == [] and [j.name for j in api.list(all=True)] == ["a"]
    again = api.resume("a")
    assert again.status == "running" and again.session is not None and again.fingerprint == a.fingerprint

    with pytest.raises(api.UsageError) as bad:
        api.resume("no-such-session")
    assert bad.value.code == 2 and "no session named" in bad.value.message
    with pytest.raises(api.UsageError):
        api.start("codex", name="bad;name", server=server)
    db = sqlite3.connect(env.store)
    db.execute("UPDATE sessions SET fingerprint=NULL")
    db.commit()
    with pytest.raises(api.ResumeRefused) as refused:
        api.resume("a")
    assert refused.value.code == 3 and refused.value.data["reasons"] == ["tampered"]


def test_the_api_docs_example_runs(orchestrator):
    env = orchestrator
    text = API_DOC.read_text()
    block = re.search(r"<!-- api-example -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert block, "docs/api.md: the api example block is gone"
    code = block.group(1)
    assert code.count('socket_name="agents"') == 1
    code = code.replace('socket_name="agents"', f'socket_name="{env.server.socket_name}"')
    exec(compile(code, str(API_DOC), "exec"), {"__name__": "docs_example"})
    assert wait_until(lambda: (env.ws / "hello.txt").exists(), 15)
    assert (env.ws / "hello.txt").read_text() == "hello from the jail\n"
    assert env.server.sessions == []  # the example stopped its jail


def test_start_in_a_worktree_and_a_failed_start_leaves_none(orchestrator):
    """api.start(worktree=...) is `start --worktree`; a start that fails after the worktree was
    made (here: verified mode with nothing approved for codex) leaves no checkout, state or branch."""
    import subprocess

    env, server = orchestrator, orchestrator.server
    git = lambda *a: subprocess.run(["git", "-C", str(env.ws), *a], check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout
    git("init", "-q")
    git("-c", "user.name=u", "-c", "user.email=u@x.test", "commit", "-q", "--allow-empty", "-m", "init")
    jail = api.start("codex", workspace=env.ws, mode="isolated", name="wt", server=server, worktree="api")
    assert jail.workspace.endswith(".worktrees/api") and "tmuxjail/api" in git("branch")
    with pytest.raises(api.NotApproved):
        api.start("codex", workspace=env.ws, mode="verified", name="wt2", server=server, worktree="no")
    assert "tmuxjail/no" not in git("branch")
    assert not (env.ws.parent / (env.ws.name + ".worktrees") / "no").exists()
    with pytest.raises(api.UsageError):
        api.start("codex", workspace=env.ws, mode="isolated", server=server, from_ref="HEAD")
