"""The tmux layer (tmuxjail/tmux.py, as libtmux runs tmux) keeps three properties, on a real tmux server
of the test's own (-L):

- no shell ever parses a pane command, and no word of it is read as tmux syntax: a hostile word
  with `;`, `$()`, quotes or `#{}` reaches the pane literally (tmux itself ends a command at any
  argv word that ends in `;`);
- a tmux server that tmuxjail starts, and every session it makes, gets no credential from this
  process's environment, also when started through libtmux's own methods on tmuxjail's Server,
  and os.environ stays whole meanwhile for the process's other threads;
- a new jailed pane gets remain-on-exit and its @tmuxjail_* options in the very tmux command that
  creates it: a command that exits at once leaves a dead pane carrying them."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from conftest import LIBTMUX_OBJECTS, wait_until

from tmuxjail.tmux import Tmux

pytestmark = pytest.mark.integration

HOSTILE = ["x;", "set-option", "-g", "@injected", "yes", ";", "$(touch pwned)", "`touch pwned2`",
           "'\"", "#{pane_id}", "#(touch pwned3)", "a\\;", "\\", "-t"]
SECRET = "sk-tmuxlayer-SECRET-77"


def _tmux(env) -> Tmux:
    return Tmux(socket_name=env.socket, env=env.environ())


def _wait_file(path: Path, timeout: float = 10) -> str:
    return wait_until(lambda: path.exists() and path.read_text().endswith("END\n") and path.read_text(), timeout,
                      f"END written to {path}")


def _writer(out: Path) -> list[str]:
    """argv of a pane that writes its arguments and its directory, one per line."""
    return ["/bin/sh", "-c", 'printf "%s\\n" "$@" "$PWD" END > "$0"', str(out), *HOSTILE]


def _clean(env, cwd: Path) -> None:
    assert env.tmux("show-options", "-gqv", "@injected").strip() == ""
    for d in (env.ws, cwd, env.root):
        assert not any(d.glob("pwned*")), list(d.glob("pwned*"))


@pytest.mark.parametrize("how", ["session", "window", "split", "respawn"])
def test_hostile_words_reach_the_pane_literally(env, how):
    tmux = _tmux(env)
    cwd = env.root / "d;$(touch pwned)'\"#{pane_id};"
    cwd.mkdir()
    out = env.root / f"argv-{how}"
    opts = {"@tmuxjail_id": "x;"}
    if how == "session":
        pane = tmux.new_session("lit", _writer(out), str(cwd), opts)
    else:
        pane = tmux.new_session("lit", ["sleep", "60"], str(env.ws), {})
        if how == "respawn":
            tmux.respawn(pane, _writer(out), str(cwd), opts)
        else:
            target = tmux.pane_option(pane, "window_id") if how == "window" else pane  # as panes.here does
            pane = tmux.new_pane(how, target, _writer(out), str(cwd), opts, detach=True)
    assert _wait_file(out).splitlines() == [*HOSTILE, str(cwd), "END"]
    assert tmux.pane_option(pane, "@tmuxjail_id") == "x;"
    _clean(env, cwd)


@pytest.fixture
def secret_environ(env, monkeypatch):
    """This process's environment as a user's with credentials in it (libtmux starts tmux with it)."""
    for k, v in env.environ(OPENAI_API_KEY=SECRET, SSH_AUTH_SOCK=f"/tmp/{SECRET}").items():
        monkeypatch.setenv(k, v)
    return env


def _no_secret(env, *flags: str) -> None:
    for args in (["show-environment", "-g"], *[["show-environment", "-t", f] for f in flags]):
        assert SECRET not in env.tmux(*args), args


def test_a_server_tmuxjail_starts_inherits_no_credential(secret_environ):
    env = secret_environ
    tmux = Tmux(socket_name=env.socket)
    tmux.new_session("cred", ["sleep", "60"], str(env.ws), {"@tmuxjail_id": "c"})
    _no_secret(env, "=cred")
    assert os.environ["OPENAI_API_KEY"] == SECRET  # narrowed for tmux only


def test_other_threads_never_see_the_client_environment(secret_environ):
    """The tmux client gets the narrowed environment as its own: os.environ stays whole for the
    threads that read it meanwhile (a warm start hashes in a thread; API users run threads)."""
    env = secret_environ
    tmux = Tmux(socket_name=env.socket)
    missed: list[str | None] = []  # what another thread read instead of the secret
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            if (got := os.environ.get("OPENAI_API_KEY")) != SECRET and not missed:
                missed.append(got)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        tmux.new_session("thr", ["sleep", "60"], str(env.ws), {"@tmuxjail_id": "t"})
        for _ in range(10):
            tmux.run("display-message", "-p", "x")
            tmux.server.cmd("display-message", "-p", "x")
    finally:
        done.set()
        thread.join()
    assert missed == []
    _no_secret(env, "=thr")


@LIBTMUX_OBJECTS
def test_libtmux_objects_of_tmuxjails_server_pass_no_credential(secret_environ):
    """The libtmux Server tmuxjail hands out (the API returns its Sessions and Panes) narrows the
    environment for its own high-level methods too, including the one that starts the server."""
    env = secret_environ
    tmux = Tmux(socket_name=env.socket)
    session = tmux.server.new_session(session_name="lib", window_command="sleep 60")
    session.active_window.split(shell="sleep 60")
    _no_secret(env, "=lib")
    assert SECRET not in "".join(env.tmux("list-panes", "-a", "-F", "#{pane_start_command}"))


@pytest.mark.parametrize("how,detach", [("window", True), ("window", False), ("split", True), ("split", False)])
def test_a_pane_that_exits_at_once_stays_dead_with_its_options(env, how, detach):
    tmux = _tmux(env)
    env.tmux("new-session", "-d", "-s", "host", "sleep 60")  # the user's own session
    first = env.tmux("display-message", "-p", "-t", "=host:", "#{pane_id}").strip()
    before = env.tmux("display-message", "-p", "-t", "=host:", "#{window_id} #{pane_id}").split()
    target = tmux.pane_option(first, "window_id") if how == "window" else first
    pane = tmux.new_pane(how, target, ["/bin/true"], str(env.ws), {"@tmuxjail_id": "dead", "@tmuxjail_fp": "sha256:0"},
                         detach=detach)
    time.sleep(0.3)
    fields = "#{pane_dead} #{remain-on-exit} #{@tmuxjail_id} #{@tmuxjail_fp} #{allow-passthrough}"
    assert env.tmux("display-message", "-p", "-t", pane, fields).split() == ["1", "on", "dead", "sha256:0", "0"]
    assert env.tmux("display-message", "-p", "-t", first, "#{remain-on-exit} #{@tmuxjail_id}").split() == ["off"]
    now = env.tmux("display-message", "-p", "-t", "=host:", "#{window_id} #{pane_id}").split()
    assert (now == before) == detach, (before, now, pane)  # -d's meaning, with the options set in the same command
