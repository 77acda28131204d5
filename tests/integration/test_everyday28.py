"""Issue 28, the everyday path's second round, without a terminal: status words and the narrow
table, doctor on every tmux server, install.sh run again, config and output shapes, window names,
attach / rename / stop --all / prune --homes / list filters, and agents waiting for the user.
Real tmux, real bubblewrap, real SQLite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
STATUS_WORDS = ("running", "exited", "killed", "gone", "unreachable", "failed", "stopped", "mismatch", "unjailed",
                "audit", "working", "waiting")


def start(env, name, provider="shell", mode="compatibility", ws=None, *extra):
    return env.json("start", provider, "--mode", mode, "--workspace", str(ws or env.ws), "--name", name,
                    "--detach", *extra)


# -- 14: status words explained; KIND survives 80 columns ---------------------------------------

def test_list_help_explains_every_status_word(env):
    text = env.run("list", "--help", check=True).stdout
    for word in STATUS_WORDS:
        assert f"  {word}" in text or f"{word} (" in text or f"{word}(" in text, word


def test_narrow_list_keeps_kind_and_agent(jail_env):
    env = jail_env
    start(env, "codex-workspace-a1b2", "codex", "isolated")
    env.tmux("split-window", "-t", "=codex-workspace-a1b2:", "sleep 300")  # an unjailed pane
    text = env.run("list", env_extra={"COLUMNS": "80"}, check=True).stdout
    header = text.splitlines()[0].split()
    assert "KIND" in header and "AGENT" in header, text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "unjailed" in text and "waiting" in text


# -- 16: doctor: what breaks, and every server of the user --------------------------------------

def test_doctor_looks_at_every_server_and_says_what_breaks(env):
    other = f"{env.socket}-x"
    env.tmux("new-session", "-d", "-s", "a")
    try:
        subprocess.run(["tmux", "-L", other, "-f", "/dev/null", "new-session", "-d", "-s", "b", ";",
                        "set", "-s", "set-clipboard", "on"], check=True, env=env.environ())
        got = json.loads(env.run("doctor", "--json").stdout)
        checks = {c["check"]: c for c in got["checks"]}
        clip = [c for name, c in checks.items() if name.startswith("tmux clipboard") and other in name]
        assert clip and not clip[0]["ok"] and f"tmux -L {other} set -s set-clipboard external" in clip[0]["fix"]
        for c in got["checks"]:
            if not c["ok"]:
                assert c["breaks"] and c["fix"], c
    finally:
        subprocess.run(["tmux", "-L", other, "kill-server"], capture_output=True, env=env.environ())


def test_doctor_honours_tmuxjail_bin(env):
    env.tmux("new-session", "-d", "-s", "a")
    env.tmux("set-environment", "-g", "PATH", "/usr/bin:/bin")
    row = lambda: next(c for c in json.loads(env.run("doctor", "--json").stdout)["checks"]  # noqa: E731
                       if c["check"] == "tmuxjail on the tmux server's PATH")
    assert not row()["ok"]
    exe = env.bin / "tj"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    env.tmux("set", "-g", "@tmuxjail-bin", str(exe))
    assert row()["ok"] and str(exe) in row()["detail"]


# -- 17: install.sh again; its PATH note ---------------------------------------------------------

def _after_install(env, tj, **extra):
    return subprocess.run(["sh", str(REPO / "scripts" / "after-install.sh"), str(tj)], cwd=env.ws,
                          env=env.environ(PWD=str(env.ws), **extra), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)


def _tj(env) -> Path:
    """A tmuxjail for this test's server, as install.sh's venv would give one."""
    b = env.bin / "tj-installed"
    b.write_text(f"#!/bin/sh\nexec {sys.executable} -P -m tmuxjail {' '.join(env.flags)} \"$@\"\n")
    b.chmod(0o755)
    return b


def test_install_again_reattaches_the_running_shell(jail_env):
    env = jail_env
    tj = _tj(env)
    first = _after_install(env, tj)
    assert first.returncode == 0, first.stderr
    second = _after_install(env, tj)
    assert second.returncode == 0, second.stderr
    assert "runs already" in second.stdout
    rows = [d for d in env.json("list") if d["kind"] == "agent"]
    assert len(rows) == 1 and rows[0]["status"] == "running"


@pytest.mark.parametrize(("files", "shell", "expect"), [
    ({".profile": 'if [ -d "$HOME/.local/bin" ] ; then\n    PATH="$HOME/.local/bin:$PATH"\nfi\n'}, "/bin/sh",
     ".profile adds it at login"),
    ({".bash_profile": "# mine\n", ".profile": "# unused by bash\n"}, "/bin/bash", "add this line to {home}/.bash_profile"),
    ({}, "/usr/bin/zsh", "add this line to {home}/.zprofile"),
])
def test_install_path_note_names_the_file_the_login_shell_reads(env, files, shell, expect):
    for name, text in files.items():
        (env.home / name).write_text(text)
    tj = env.bin / "tj-fake"  # only the note is looked at: a tmuxjail that does nothing
    tj.write_text("#!/bin/sh\nexit 0\n")
    tj.chmod(0o755)
    proc = subprocess.run(["sh", str(REPO / "scripts" / "after-install.sh"), str(tj)],
                          cwd=env.ws, env=env.environ(PWD=str(env.ws), SHELL=shell, PATH="/usr/bin:/bin"),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert expect.format(home=env.home) in proc.stdout, proc.stdout + proc.stderr


# -- 20: config, output shapes, window names, menu verbs ----------------------------------------

def test_default_mode_outside_allowed_modes_is_a_config_error(jail_env):
    env = jail_env
    env.config_dir.mkdir(parents=True)
    (env.config_dir / "config.toml").write_text('default_mode = "compatibility"\nallowed_modes = ["isolated"]\n')
    proc = env.run("start", "shell", "--detach")
    assert proc.returncode == 2 and "default_mode 'compatibility' is not in allowed_modes" in proc.stderr
    assert "Traceback" not in proc.stderr and not env.store.exists()
    (env.config_dir / "config.toml").write_text('allowed_modes = ["isolated"]\n')  # unset: the first allowed
    assert env.json("start", "shell", "--detach", "--name", "i")["mode"] == "isolated"


def test_list_json_records_share_one_shape_and_show_prints_no_none(jail_env):
    env = jail_env
    start(env, "a")
    start(env, "b")
    env.run("stop", "b", check=True)
    env.tmux("split-window", "-t", "=a:", "sleep 300")
    rows = env.json("list", "--all")
    assert len(rows) == 3 and len({tuple(sorted(r)) for r in rows}) == 1
    text = env.run("show", "a", check=True).stdout
    assert "None" not in text and "private_home: none" in text


def test_windows_are_named_after_the_cli(jail_env):
    env = jail_env
    start(env, "w", "codex", "isolated")
    names = lambda: env.tmux("list-windows", "-t", "=w", "-F", "#{window_name}").split()  # noqa: E731
    assert names() == ["codex"]
    env.tmux("new-window", "-t", "=w:")  # prefix c: the session's default-command, a shell in the jail
    wait_until(lambda: names() == ["codex", "codex-shell"], 20, f"the shell window's name: {names()}")
    env.json("shell", "w", "--detach")
    assert names() == ["codex", "codex-shell", "codex-shell"]


def test_menu_lists_no_internal_verb(env):
    proc = env.run("menu", "bogus")
    assert proc.returncode == 2 and "_start" not in proc.stderr and "'stop'" in proc.stderr
    assert "_" not in env.run("menu", "--help", check=True).stdout.split("positional arguments")[1].split("options")[0]
    assert "_start" not in env.run("completion", "bash", check=True).stdout


# -- 21: attach, rename, stop --all, prune --homes, list filters ---------------------------------

def test_attach_only_reattaches(jail_env):
    env = jail_env
    info = start(env, "a", "shell", "isolated")
    got = env.json("attach", "a")
    assert got["tmux_pane"] == info["tmux_pane"] and "attach-session" in got["attach"]
    proc = env.run("attach", "a")  # no terminal: it says how
    assert proc.returncode == 0 and "attach with:" in proc.stdout
    env.tmux("kill-session", "-t", "=a")
    proc = env.run("attach", "a")
    assert proc.returncode == 3 and "tmuxjail resume a" in proc.stderr
    assert env.tmux("has-session", "-t", "=a", check=False) == ""  # nothing was relaunched
    assert env.run("attach", "nope").returncode == 2


def test_rename(jail_env):
    env = jail_env
    start(env, "old")
    start(env, "other")
    got = env.json("rename", "old", "new")
    assert got["name"] == "new" and got["tmux_session"] == "new" and got["status"] == "running"
    assert env.tmux("has-session", "-t", "=new", check=False) == ""
    proc = env.run("rename", "new", "other")
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert env.run("rename", "gone", "x").returncode == 2
    assert env.json("resume", "new")["name"] == "new"


def test_stop_all_of_a_workspace(jail_env):
    env = jail_env
    other = env.root / "ws2"
    other.mkdir()
    start(env, "a")
    start(env, "b")
    start(env, "c", ws=other)
    assert env.run("stop").returncode == 2
    got = env.json("stop", "--all", "--workspace", str(env.ws))
    assert sorted(d["name"] for d in got["stopped"]) == ["a", "b"] and got["failed"] == []
    assert [d["name"] for d in env.json("list")] == ["c"]
    assert [d["name"] for d in env.json("stop", "--all")["stopped"]] == ["c"]
    assert env.json("list") == []


def test_list_filters(jail_env):
    env = jail_env
    other = env.root / "ws2"
    other.mkdir()
    start(env, "a")
    start(env, "b", "codex", "compatibility", other)
    assert [d["name"] for d in env.json("list", "--workspace", str(other))] == ["b"]
    assert [d["name"] for d in env.json("list", "--provider", "shell")] == ["a"]
    assert env.run("list", "--provider", "nope").returncode == 2


def test_prune_homes(jail_env):
    env = jail_env
    gone_ws = env.root / "gone"
    gone_ws.mkdir()
    start(env, "dead", "shell", "isolated", gone_ws)
    live = start(env, "live", "shell", "isolated")
    # A running session whose workspace is gone: its home is in use, and kept.
    vanishing = env.root / "vanishing"
    vanishing.mkdir()
    running = start(env, "running", "shell", "isolated", vanishing)
    vanishing.rmdir()
    dead_home = Path(env.json("show", "dead")["private_home"])
    (dead_home / "big").write_bytes(b"x" * 100_000)
    os.chmod(dead_home / "big", 0o444)
    (dead_home / "ro").mkdir()
    (dead_home / "ro" / "f").write_text("x")
    os.chmod(dead_home / "ro", 0o555)
    env.run("stop", "dead", check=True)
    shutil.rmtree(gone_ws)
    orphan = dead_home.parent / "ws-nobody-000000000000"
    orphan.mkdir()

    dry = env.json("prune", "--homes", "--dry-run")
    found = {h["home"]: h for h in dry["homes"]}
    assert set(found) == {str(dead_home), str(orphan)}
    assert found[str(dead_home)]["bytes"] >= 100_000 and dead_home.exists()
    text = env.run("prune", "--homes", "--dry-run", check=True).stdout
    assert "would delete 2 private home(s)" in text and "no longer exists" in text

    got = env.json("prune", "--homes")
    assert len(got["homes"]) == 2 and not dead_home.exists() and not orphan.exists()
    assert Path(live["private_home"]).is_dir() and Path(running["private_home"]).is_dir()
    assert env.run("prune", "--homes", "--older-than", "3d").returncode == 2


def test_completion_knows_the_new_verbs(env):
    text = env.run("completion", "bash", check=True).stdout
    for word in ("attach", "rename", "--homes", "--provider"):
        assert word in text


# -- 22: agents waiting for the user ------------------------------------------------------------

# A stand-in with a real CLI's rhythm: at the bottom of its screen, a spinner footer redrawn every
# 0.2 s while $PWD/busy exists, then its prompt, drawn once, and quiet.
BUSY_CLI = """#!/bin/sh
i=0; shown=""
n=0; while [ $n -lt 80 ]; do echo; n=$((n+1)); done
while :; do
  if [ -e "$PWD/busy" ]; then i=$((i+1)); printf '\\r* Working (%ds * esc to interrupt)   ' "$i"; shown=busy
  elif [ "$shown" != idle ]; then printf '\\r> ask me anything                         '; shown=idle
  fi
  sleep 0.2
done
"""


def test_waiting_agents_are_marked_and_alerted(jail_env):
    env = jail_env
    (env.bin / "codex").write_text(BUSY_CLI)
    (env.ws / "busy").touch()
    env.tmux("new-session", "-d", "-s", "home")
    env.tmux("source-file", str(REPO / "tmux.conf.example"))
    env.tmux("set", "-g", "@tmuxjail-waiting-alert", "2")
    info = start(env, "ag", "codex", "isolated")
    pane = info["tmux_pane"]
    snippet = lambda: env.tmux("display-message", "-p", "-t", pane, "#{E:@tmuxjail-status}")  # noqa: E731
    agent = lambda: next(d for d in env.json("list") if d["name"] == "ag")["agent"]  # noqa: E731
    wait_until(lambda: agent() == "working", 20, "the agent working")
    assert "waiting" not in snippet()
    assert env.tmux("display-message", "-p", "-t", pane, "#{window_silence_flag}").strip() == "0"
    (env.ws / "busy").unlink()
    wait_until(lambda: agent() == "waiting", 20, "the agent waiting")
    assert "[isolated:codex waiting]" in snippet()
    assert "waiting" in env.run("list", env_extra={"COLUMNS": "80"}).stdout
    # tmux's silence alert fired on the agent's window (the hook shows a message on a client).
    wait_until(lambda: env.tmux("display-message", "-p", "-t", pane, "#{window_silence_flag}").strip() == "1",
               20, "the silence alert")
    assert "waits for you" in env.tmux("show-hooks", "-t", pane, "alert-silence")
    assert "alert-silence" not in env.tmux("show-hooks", "-w", "-t", pane)  # the window's are the audit's


def test_waiting_alert_is_off_unless_asked(jail_env):
    env = jail_env
    info = start(env, "quiet", "codex", "isolated")
    assert env.tmux("show", "-wv", "-t", info["tmux_pane"], "monitor-silence").strip() == "0"
