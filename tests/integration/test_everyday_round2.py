"""The everyday path, second round (issue 28): what a new user met that was wrong, on a real tmux
server with real bubblewrap and the stand-in CLIs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from conftest import wait_until

pytestmark = pytest.mark.integration


def inside(env, pane: str) -> dict:
    """The environment of a process running in tmux pane `pane`, as tmux gives it."""
    tmux_var = env.tmux("display-message", "-p", "-t", pane, "#{socket_path},#{pid},#{session_id}").strip()
    return {"TMUX": tmux_var.replace(",$", ","), "TMUX_PANE": pane}


def run_inside(env, pane: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "tmuxjail", *args], env=env.environ(**inside(env, pane)),
                          cwd=env.ws, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def panes_of(env, session: str) -> list[str]:
    return env.tmux("list-panes", "-s", "-t", f"={session}", "-F", "#{pane_id}").split()


def test_a_stopped_here_or_split_jail_is_resumed_in_the_session_it_came_from(jail_env):
    """28.3: resume called it "tampered" and said to stop it; stop said there was no live session."""
    env = jail_env
    env.tmux("new-session", "-d", "-s", "mine", "-c", str(env.ws))
    mine = env.tmux("display-message", "-p", "-t", "=mine:", "#{pane_id}").strip()
    for args in (["--here", "--name", "w"], ["--split", "h", "--name", "s"]):
        proc = run_inside(env, mine, "start", "shell", "--mode", "isolated", *args, "--json")
        assert proc.returncode == 0, proc.stderr
    for name in ("w", "s"):
        env.run("stop", name, check=True)
    again = env.run("stop", "w")
    assert again.returncode != 0 and "stopped already" in again.stderr and "tmuxjail resume w" in again.stderr
    assert panes_of(env, "mine") == [mine]
    for name in ("w", "s"):
        out = env.json("resume", name, "--detach")
        assert out["status"] == "running" and out["tmux_session"] == "mine", out
        assert out["tmux_pane"] in panes_of(env, "mine")
    assert sorted(r["name"] for r in env.json("list")) == ["s", "w"]
    # The session it came from is gone: a session of its own, named after it.
    env.run("stop", "w", check=True)
    env.tmux("kill-session", "-t", "=mine")
    out = env.json("resume", "w", "--detach")
    assert out["status"] == "running" and out["tmux_session"] == "w"
    assert env.tmux("display-message", "-p", "-t", out["tmux_pane"], "#{session_name}").strip() == "w"


def test_the_refusal_of_a_stopped_session_never_sends_the_user_to_stop(jail_env):
    env = jail_env
    env.tmux("new-session", "-d", "-s", "mine", "-c", str(env.ws))
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "x", "--detach")
    env.run("stop", "x", check=True)
    # A pane that is not the jail's took its tmux session's name.
    env.tmux("new-session", "-d", "-s", "x", "-c", str(env.ws))
    proc = env.run("resume", "x", "--detach")
    assert proc.returncode == 3 and "tmuxjail stop" not in proc.stderr, proc.stderr
    assert json.loads(env.run("show", "x", "--json").stdout)["status"] == "stopped"


def test_a_start_from_inside_a_jail_says_so(jail_env):
    """28.18: tmux's error about a socket the jail cannot see, instead of what is going on."""
    env = jail_env
    # Compatibility shows the host's files, tmuxjail among them (a strict jail has no Python of ours).
    info = env.json("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--name", "j",
                    "--detach")
    out, rc = env.ws / "inside.err", env.ws / "inside.rc"
    (env.ws / "tj").write_text(f"#!/bin/sh\nexec {sys.executable} -P -m tmuxjail \"$@\"\n")
    (env.ws / "tj").chmod(0o755)
    env.tmux("send-keys", "-t", info["tmux_pane"], "-l",
             f"{env.ws}/tj start shell --detach 2>{out}; echo $? >{rc}\n")
    wait_until(lambda: rc.exists() and rc.read_text().strip(), 30, "the start from inside the jail")
    err = out.read_text()
    assert rc.read_text().strip() != "0"
    assert "you are inside a tmuxjail jail" in err and "Traceback" not in err, err


def test_the_name_of_a_stopped_record_is_refused_with_the_fix(jail_env):
    """28.19: `--name` of a stopped record made a second record of that name."""
    env = jail_env
    args = ("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "n", "--detach")
    env.json(*args)
    env.run("stop", "n", check=True)
    proc = env.run(*args)
    assert proc.returncode == 2 and "tmuxjail resume n" in proc.stderr and "Traceback" not in proc.stderr
    assert [r["name"] for r in env.json("list", "--all")] == ["n"]
    assert env.json("resume", "n", "--detach")["status"] == "running"  # the fix it gave works


FAKE_TMUX = """
import os, socket, sys, time
open("/proc/self/comm", "w").write("tmux: server")
s = socket.socket(socket.AF_UNIX)
s.bind("\\0" + sys.argv[1])
s.listen()
print("ready", flush=True)
time.sleep(120)
"""


def test_an_abstract_tmux_socket_is_no_file_in_the_servers_cwd(jail_env):
    """28.8: certify's test servers listen on abstract sockets (`@tmuxjail-certify-...`);
    host.running_servers joined that name to the server's cwd, and the jail's mask of it then
    made an empty file of that name in the user's current directory (the home, for certify)."""
    from tmuxjail import host

    env = jail_env
    name = f"tmuxjail-certify-test-{os.getpid()}"
    fake = subprocess.Popen([sys.executable, "-c", FAKE_TMUX, name], cwd=env.home, stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout.readline().strip() == "ready"
        assert not [p for p in host.running_servers(os.getuid()) if name in p]
        # The jail of a start from $HOME masks no such file. (Its argv, not the home's listing: on a
        # shared machine any old tmuxjail that sees this stand-in server makes the file there.)
        dry = env.json("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--dry-run",
                       cwd=env.home)
        assert not [a for a in dry["sandbox_argv"] if name in a]
        assert not [f for f in dry["host_layout"]["tmux_files"] if name in f]
    finally:
        fake.kill()
        fake.wait()


def test_doctor_checks_each_cli_on_the_tmux_servers_path_with_a_fix_that_works(env):
    """28.6: the start menu greyed installed CLIs out as "not installed" (it looks them up on the
    tmux server's PATH); doctor now names the cause and the fix."""
    env.tmux("-f", "/dev/null", "new-session", "-d", "-s", "x", "-c", str(env.ws))
    env.tmux("set-environment", "-g", "PATH", "/usr/bin:/bin")  # a server started before ~/bin was on PATH
    # A key runs the menu with the server's environment.
    server = {"PATH": "/usr/bin:/bin"}
    out = "\n".join(shlex.split(env.run("menu", "start", "-t", "%0", "--print", check=True, env_extra=server).stdout))
    assert "-codex        compatibility (default)   not on the tmux server's PATH" in out.splitlines()  # greyed
    assert "not installed" not in out

    def codex():
        data = json.loads(env.run("doctor", "--json").stdout)
        return next(c for c in data["checks"] if c["check"] == "Codex CLI on the tmux server's PATH")

    bad = codex()
    assert not bad["ok"] and str(env.bin) in bad["detail"] and not bad["required"]
    fix = bad["fix"].split("   ")[0]
    assert fix.startswith("tmux set-environment -g PATH ")
    env.tmux(*shlex.split(fix)[1:])  # the fix, as given
    assert codex()["ok"]
    server["PATH"] = env.tmux("show-environment", "-g", "PATH").strip()[5:]
    out = "\n".join(shlex.split(env.run("menu", "start", "-t", "%0", "--print", check=True, env_extra=server).stdout))
    assert "codex        compatibility (default)" in out.splitlines()


@pytest.mark.parametrize("var", ["XDG_STATE_HOME", "XDG_DATA_HOME", "HOME"])
def test_doctor_sees_what_makes_start_fail_and_send_the_user_there(jail_env, var):
    """28.7: an unusable HOME, state or data directory: start failed and said "run tmuxjail
    doctor", and doctor said all was well."""
    env = jail_env
    if var == "HOME":
        if os.getuid() == 0:
            pytest.skip("root writes any directory: an unwritable HOME is an ordinary user's case")
        env.home.chmod(0o500)  # XDG_* inside it stay where they are, unwritable with it
    else:
        blocker = env.root / "not-a-dir"
        blocker.write_text("")
        env.vars[var] = str(blocker)
    try:
        start = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--detach")
        assert start.returncode != 0 and "Traceback" not in start.stderr
        data = json.loads(env.run("doctor", "--json").stdout)
        bad = [c for c in data["checks"] if not c["ok"] and c["required"]]
        assert bad and not data["ok"], data
        assert any(c["fix"] for c in bad)
    finally:
        env.home.chmod(0o700)


def test_a_workspace_refusal_says_what_changed(jail_env):
    """28.15: "the policy changed (workspace)" and nothing about what."""
    env = jail_env
    subprocess.run(["git", "init", "-q", str(env.ws)], check=True)
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "g", "--detach")
    env.run("stop", "g", check=True)
    subprocess.run(["git", "init", "-q", str(env.ws / "nested")], check=True)
    proc = env.run("resume", "g", "--detach")
    assert proc.returncode == 3, proc.stderr
    assert "a new repository appeared at `nested/.git`" in proc.stderr, proc.stderr


def test_a_live_session_is_reattached_after_a_config_change_and_accept_changes_asks(jail_env):
    """28.12: a running session was refused after any config change, though reattaching launches
    nothing; --accept-changes did not say it ends the running CLI."""
    env = jail_env
    info = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "l", "--detach")
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('[limits]\ntmp = "64M"\n')
    proc = env.run("resume", "l", "--detach", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["tmux_pane"] == info["tmux_pane"] and out["policy_changed"] == ["limits"]
    assert "reattached" in proc.stderr and "--accept-changes" in proc.stderr
    # Moving it ends the running CLI: asked first; with no terminal to ask on, refused with the fix.
    proc = env.run("resume", "l", "--detach", "--accept-changes")
    assert proc.returncode == 2 and "--yes" in proc.stderr, proc.stderr
    assert env.json("show", "l")["fingerprint"] == info["fingerprint"]
    moved = env.json("resume", "l", "--detach", "--accept-changes", "--yes")
    assert moved["fingerprint"] != info["fingerprint"] and moved["status"] == "running"
    assert "policy_changed" not in moved


class Client:
    """A real tmux client of the server under test, attached in an outer tmux server's pane."""

    def __init__(self, env, session: str):
        self.env, self.outer = env, f"{env.socket}-c"
        cmd = f"exec env -u TMUX tmux -L {env.socket} attach -t ={session}"
        subprocess.run(["tmux", "-L", self.outer, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "120",
                        "-y", "40", cmd], env=env.environ(), check=True)
        wait_until(lambda: env.tmux("list-clients", "-F", "#{client_name}").strip(), 10, "a client")
        self.name = env.tmux("list-clients", "-F", "#{client_name}").split()[0]

    def session(self) -> str | None:
        out = self.env.tmux("list-clients", "-F", "#{client_name} #{session_name}").split("\n")
        return next((ln.split()[1] for ln in out if ln.startswith(self.name + " ")), None)

    def close(self):
        subprocess.run(["tmux", "-L", self.outer, "kill-server"], capture_output=True)


@pytest.mark.parametrize("came_from", ["home", None])
def test_stop_takes_the_client_back_where_it_came_from_or_detaches_it(jail_env, came_from):
    """28.13: stop (the `x` key, the end of discover) dropped the user's client into whichever
    session was most recently active, an unrelated one."""
    env = jail_env
    env.tmux("new-session", "-d", "-s", "home", "-c", str(env.ws))
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "j", "--detach")
    client = Client(env, came_from or "j")
    try:
        if came_from:
            env.tmux("switch-client", "-c", client.name, "-t", "=j")
            wait_until(lambda: client.session() == "j", 10, "the switch")
        env.tmux("new-session", "-d", "-s", "unrelated", "-c", str(env.ws))  # the most recently active
        env.run("stop", "j", check=True)
        if came_from:
            wait_until(lambda: client.session() != "j", 10, "the client to leave j")
            assert client.session() == "home"
        else:
            wait_until(lambda: client.session() is None, 10, "a clean detach")
        assert env.tmux("has-session", "-t", "=unrelated", check=False) == ""
    finally:
        client.close()
