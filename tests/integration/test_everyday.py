"""The everyday path, as a newcomer meets it (issue 12): tmux's default server on a fresh account,
a non-UTF-8 locale, other tmux servers, odd homes, damaged stores, a server killed mid-start.
Most tests here use the default server (no -L) and LC_ALL=C, unlike the rest of the suite."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import wait_until

pytestmark = pytest.mark.integration




def one_line_error(proc, code=None):
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("tmuxjail: "), proc.stderr
    assert proc.returncode != 0 and (code is None or proc.returncode == code), (proc.returncode, proc.stderr)


@pytest.fixture
def newcomer(jail_env):
    """The default tmux server, no tmux-UID directory yet, LC_ALL=C."""
    jail_env.use_default_server("C")
    assert not Path(jail_env.default_socket).parent.exists()
    return jail_env


def test_default_server_on_a_fresh_account_in_the_c_locale(newcomer):
    env = newcomer
    proc = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "first", "--detach")
    assert proc.returncode == 0, proc.stderr
    assert Path(env.default_socket).is_socket()  # tmux made its directory: we did not pass -S
    rows = env.json("list")
    assert [(r["name"], r["status"]) for r in rows] == [("first", "running")]
    assert rows[0]["tmux_socket"] == env.default_socket
    # A live session is reattached, never started twice ("duplicate session" before the fix).
    again = env.json("resume", "first", "--detach")
    assert again["status"] == "running" and again["tmux_pane"] == rows[0]["tmux_pane"]
    assert env.tmux("list-sessions", "-F", "#{session_name}").split() == ["first"]


def test_c_locale_with_a_named_server(jail_env):
    env = jail_env
    env.vars.pop("LANG")
    env.vars["LC_ALL"] = "C"
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "c", "--detach")
    assert [r["status"] for r in env.json("list")] == ["running"]
    assert "running" in env.run("list", check=True).stdout


def test_start_menu_reads_a_non_ascii_directory_exactly_in_the_c_locale(jail_env):
    """Under LC_ALL=C a tmux client prints `_` for every non-ASCII or control character: the start
    menu's item would read `caf_` for a pane in `café` (a directory anything in the home could
    have made) and start the new jail there. tmuxjail's tmux client reads bytes as they are."""
    env = jail_env
    env.vars.pop("LANG")
    env.vars["LC_ALL"] = "C"
    real, decoy = env.ws / "café", env.ws / "caf_"
    real.mkdir()
    decoy.mkdir()
    env.tmux("-f", "/dev/null", "new-session", "-d", "-s", "plain", "-c", str(real))
    pane = env.tmux("display-message", "-p", "-t", "=plain:", "#{pane_id}").strip()
    proc = env.run("menu", "_start", "shell", "isolated", "-t", pane)
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in env.json("list") if r["name"] != "plain"]
    assert [r["workspace"] for r in rows] == [str(real)]


def test_tmux_tmpdir_that_does_not_exist_yet(jail_env):
    env = jail_env
    env.vars["TMUX_TMPDIR"] = str(env.root / "not-yet")  # tmux falls back to /tmp
    info = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "t", "--detach")
    real = env.tmux("display-message", "-p", "#{socket_path}").strip()
    assert info["tmux_socket"] == real and real.startswith("/tmp/tmux-")
    assert [r["status"] for r in env.json("list")] == ["running"]


def test_socket_path_in_a_missing_directory_is_one_line(jail_env):
    env = jail_env
    env.flags = ["-S", str(env.root / "missing" / "sock")]
    proc = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--detach")
    one_line_error(proc)
    assert "missing" in proc.stderr


def test_a_jail_killed_by_sigkill_is_not_exited_0(newcomer):
    env = newcomer
    info = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "k", "--detach")
    pid = int(env.tmux("display-message", "-p", "-t", info["tmux_pane"], "#{pane_pid}").strip())
    os.kill(pid, signal.SIGKILL)  # the pane's own process: bwrap, the jail's outermost process
    wait_until(lambda: env.tmux("display-message", "-p", "-t", info["tmux_pane"], "#{pane_dead}").strip() == "1",
               what="the pane to die")
    row = env.json("list")[0]
    assert row["status"] == "killed" and row["signal"] == "SIGKILL", row
    assert "killed(SIGKILL)" in env.run("list", "--color", "never", check=True).stdout


def _servers(env):
    """Two tmux servers: A (env's own -L socket) and B (another -L socket), both cleaned up."""
    other = f"{env.socket}-b"
    return ["-L", env.socket], ["-L", other]


def _sessions_on(env, flags) -> list[str]:
    import subprocess

    proc = subprocess.run(["tmux", *flags, "list-sessions", "-F", "#{session_name}"], capture_output=True,
                          text=True, env=env.environ())
    return proc.stdout.split()


def test_a_session_is_acted_on_where_it_runs(jail_env):
    env = jail_env
    a, b = _servers(env)
    try:
        env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
        env.flags = b
        env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.bin), "--name", "b", "--detach")
        # From B: list shows both, with their servers; --server filters.
        rows = {r["name"]: r for r in env.json("list")}
        assert rows["a"]["status"] == rows["b"]["status"] == "running"
        assert rows["a"]["server"] == env.socket and rows["b"]["server"] == b[1]
        table = env.run("list", "--color", "never", check=True).stdout
        assert "SERVER" in table.splitlines()[0] and env.socket in table
        assert [r["name"] for r in env.json("list", "--server", env.socket)] == ["a"]
        assert [r["name"] for r in env.json("list", "--server", rows["b"]["tmux_socket"])] == ["b"]
        # From B, resume of a live session on A reattaches there: no second copy on B.
        got = env.json("resume", "a", "--detach")
        assert got["status"] == "running" and got["tmux_pane"] == rows["a"]["tmux_pane"]
        assert _sessions_on(env, b) == ["b"] and _sessions_on(env, a) == ["a"]
        assert env.json("show", "a")["status"] == "running"
        shell = env.json("shell", "a", "--detach")
        assert env.tmux("list-panes", "-s", "-t", "=a", "-F", "#{pane_id}", check=False) == ""  # not on B
        env.flags = a
        assert shell["shell_pane"] in env.tmux("list-panes", "-s", "-t", "=a", "-F", "#{pane_id}").split()
        # From B, stop kills it on A.
        env.flags = b
        assert env.run("stop", "a").returncode == 0
        assert _sessions_on(env, a) == [] and _sessions_on(env, b) == ["b"]
        # The agent of a dead session is relaunched on its own server, not on the caller's.
        env.flags = a
        env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.outside), "--name", "c", "--detach")
        env.tmux("kill-session", "-t", "=c")
        env.flags = b
        assert env.json("resume", "c", "--detach")["status"] == "running"
        assert "c" in _sessions_on(env, a) and "c" not in _sessions_on(env, b)
    finally:
        import subprocess

        subprocess.run(["tmux", *b, "kill-server"], capture_output=True, env=env.environ())


def test_a_server_that_cannot_be_reached_is_refused_with_the_command(jail_env, tmp_path):
    import socket
    import threading

    env = jail_env
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
    fake = tmp_path / "fake.sock"  # a socket whose "server" hangs up on every client
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(fake))
    srv.listen(8)

    def hang_up():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.close()

    threading.Thread(target=hang_up, daemon=True).start()
    db = sqlite3.connect(env.store)
    db.execute("UPDATE sessions SET tmux_socket=?", (str(fake),))
    db.commit()
    try:
        for cmd in ("resume", "stop"):
            proc = env.run(cmd, "a")
            one_line_error(proc, 1)
            assert f"tmux -S {fake} attach -t =a" in proc.stderr, proc.stderr
        assert db.execute("SELECT status FROM sessions").fetchone()[0] == "running"  # not "stopped"
        row = env.json("list")[0]  # shown, never "gone" (prune would forget it)
        assert row["status"] == "unreachable" and row["server"] == str(fake)
        assert env.json("prune", "--dry-run")["sessions"] == []
    finally:
        srv.close()


@pytest.mark.parametrize("home", ["/nonexistent", "/", ""])
@pytest.mark.parametrize("cmd", [("start", "shell", "--detach"), ("list",), ("resume", "x"), ("stop", "x")])
def test_odd_homes_get_one_line_with_the_fix(jail_env, home, cmd):
    env = jail_env
    for k in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env.vars.pop(k)
    env.vars["HOME"] = home
    proc = env.run(*cmd, "-v")
    one_line_error(proc, 1)
    assert "HOME" in proc.stderr and "export HOME=" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 2  # the reason, then the fix
    assert not Path("/nonexistent").exists()


def test_the_error_path_never_raises_and_logs_the_traceback(jail_env):
    env = jail_env
    # A bug of ours, provoked: an invalid UTF-8 byte in a stored request. With the log directory
    # unusable (a file in its place), the handler itself must not raise.
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
    db = sqlite3.connect(env.store)
    db.execute("UPDATE sessions SET request='{not json'")
    db.commit()
    proc = env.run("show", "a", "-v")
    assert proc.returncode == 1 and "internal error: JSONDecodeError" in proc.stderr
    assert "Traceback (most recent call last)" in proc.stderr  # -v: the full traceback
    logged = [json.loads(ln) for ln in (env.state_dir / "tmuxjail.log").read_text().splitlines()]
    assert any("Traceback" in e.get("traceback", "") for e in logged if e["event"] == "internal_error")
    (env.state_dir / "tmuxjail.log").unlink()
    (env.state_dir / "tmuxjail.log").mkdir()  # the log cannot be opened now
    proc = env.run("show", "a")
    assert proc.returncode == 1 and "internal error: JSONDecodeError" in proc.stderr
    assert "Traceback" not in proc.stderr and "During handling" not in proc.stderr


@pytest.mark.parametrize("damage", ["garbage", "no-tables"])
def test_a_damaged_store_is_one_line_everywhere_and_moved_aside_on_request(jail_env, damage):
    env = jail_env
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
    env.json("approve", "codex", "--yes")
    env.kill()
    if damage == "garbage":
        with open(env.store, "r+b") as f:  # the header and first pages: nothing reads
            f.write(b"\0garbage" * 512)
    else:
        db = sqlite3.connect(env.store)
        db.execute("DROP TABLE sessions")
        db.commit()
        db.close()
    for cmd in (("list",), ("list", "--check"), ("show", "a"), ("resume", "a"), ("stop", "a"), ("approvals",)):
        if damage == "no-tables" and cmd[0] in ("resume", "stop", "approvals"):
            continue  # a writable open re-creates a missing table; nothing to refuse
        proc = env.run(*cmd)
        one_line_error(proc, 1)
        assert "store" in proc.stderr and "damaged" in proc.stderr and "doctor --move-store-aside" in proc.stderr, cmd
    doc = json.loads(env.run("doctor", "--json").stdout)
    store = next(c for c in doc["checks"] if c["check"] == "store")
    assert not store["ok"] and store["required"] and "move-store-aside" in store["fix"]
    before = env.store.read_bytes()
    moved = env.json("doctor", "--move-store-aside")
    assert Path(moved["moved_to"]).read_bytes() == before  # kept as it was
    assert env.run("list").returncode == 0
    if damage == "no-tables":
        assert moved["kept"]["approvals"] == 1  # what still reads is copied over
        assert len(env.json("approvals")) == 1


def test_an_invalid_config_is_its_own_reason(jail_env):
    env = jail_env
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "a", "--detach")
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("default_mode = [\n")
    rows = env.json("list", "--check")
    assert rows[0]["status"] == "mismatch" and rows[0]["reasons"] == ["config"]
    live = env.run("resume", "a", "--detach", "--json")  # live: reattached, nothing launched (28.12)
    assert live.returncode == 0 and json.loads(live.stdout)["policy_changed"] == ["config"], live.stderr
    assert "tmuxjail doctor" in live.stderr
    env.kill()
    proc = env.run("resume", "a", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["config"]
    doc = json.loads(env.run("doctor", "--json").stdout)
    cfg = next(c for c in doc["checks"] if c["check"] == "config")
    assert not cfg["ok"] and str(env.config_dir / "config.toml") in cfg["detail"] + cfg["fix"]


def test_doctor_checks_what_start_needs(jail_env):
    env = jail_env
    doc = json.loads(env.run("doctor", "--json").stdout)
    names = {c["check"]: c for c in doc["checks"]}
    for name in ("home", "tmux socket dir", "config", "store", "tmuxjail on the tmux server's PATH"):
        assert name in names, name
    assert names["home"]["ok"] and names["config"]["ok"] and names["store"]["ok"]
    assert str(env.config_dir / "config.toml") in names["config"]["detail"]
    # Strict modes default to the proxy: doctor says whether it can run here, and requires it.
    assert names["egress proxy"]["ok"] and names["egress proxy"]["required"], names["egress proxy"]
    assert "listening on each jail's own loopback" in names["egress proxy"]["detail"]
    env.vars["HOME"] = "/nonexistent"
    doc = json.loads(env.run("doctor", "--json").stdout)
    home = next(c for c in doc["checks"] if c["check"] == "home")
    assert not home["ok"] and not doc["ok"] and "export HOME=" in home["fix"]


def test_tmux_server_killed_during_start_says_so(jail_env):
    env = jail_env
    # A tmux that kills its server right after new-session: the pane never gets to start the jail.
    wrapper = env.bin / "tmux"
    # The server flag as `-L NAME` or (libtmux) `-LNAME`, with -u before or after it.
    wrapper.write_text('#!/bin/sh\nout=$(/usr/bin/tmux "$@"); rc=$?\nsock=; prev=\n'
                       'for a in "$@"; do [ -z "$sock" ] || break; case "$prev" in -L|-S) sock="$prev $a";; esac; '
                       'case "$a" in -L?*|-S?*) sock=$a;; esac; prev=$a; done\n'
                       'case " $* " in *" new-session "*) /usr/bin/tmux $sock kill-server;; esac\n'
                       'printf "%s\\n" "$out"; exit $rc\n')
    wrapper.chmod(0o755)
    proc = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "k", "--detach")
    one_line_error(proc, 1)
    assert "tmux server exited" in proc.stderr, proc.stderr
    assert "dead pane" not in proc.stderr and "within" not in proc.stderr


def test_a_replaced_launcher_is_said_at_once(jail_env):
    """Issue 18.6: a pane whose launcher was replaced (here a hook's respawn-pane) can never bring
    the jail up. start names what runs there instead of waiting out its 10 s (bench/ times it)."""
    env = jail_env
    env.tmux("new-session", "-d", "-s", "keep")
    env.tmux("set-hook", "-g", "session-created", "respawn-pane -k 'sleep 600'")
    proc = env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "r", "--detach")
    one_line_error(proc, 5)
    assert re.search(r"the pane runs '(sleep|sh)', not tmuxjail's launcher", proc.stderr), proc.stderr
    assert "within" not in proc.stderr


def test_what_counts_as_the_launchers_own_pane_process(tmp_path):
    from tmuxjail.host import foreign_pane_process

    procs = {
        "launcher": [sys.executable, "-c", "import time; time.sleep(30)", "tmuxjail.pane.launch"],
        "tracer": ["/bin/sh", "-c", "sleep 30", "strace", "/usr/bin/bwrap"],
        "other": ["sleep", "30"],
    }
    running = {k: subprocess.Popen(v) for k, v in procs.items()}
    try:
        time.sleep(0.3)
        seen = {k: foreign_pane_process(p.pid) for k, p in running.items()}
    finally:
        for p in running.values():
            p.kill()
            p.wait()
    assert seen == {"launcher": None, "tracer": None, "other": "sleep"}
    assert foreign_pane_process(running["other"].pid) is None  # gone: nothing to say


def test_needs_without_sudo_prints_the_package_to_install(tmp_path):
    import subprocess

    repo = Path(__file__).resolve().parents[2]
    bindir = tmp_path / "bin"  # an ordinary user's PATH on a machine without sudo
    bindir.mkdir()
    (bindir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bindir / "id").chmod(0o755)
    proc = subprocess.run(["/bin/sh", "-c", '. ./scripts/needs.sh; needs "tmuxjail-test-pkg:false" "sh:true"'],
                          cwd=repo, env={"PATH": str(bindir)}, capture_output=True, text=True)
    assert proc.returncode == 1, proc
    assert "apt-get install -y tmuxjail-test-pkg" in proc.stderr and "not found" not in proc.stderr, proc.stderr


def test_claude_verified_and_plain_claude_share_one_config(jail_env):
    """Claude reads ~/.claude/.config.json when it exists, with or without CLAUDE_CONFIG_DIR: a
    verified session (CLAUDE_CONFIG_DIR=~/.claude) and plain `claude` then use the same file, not
    ~/.claude/.claude.json and ~/.claude.json drifting apart (issue 12.12)."""
    env = jail_env
    env.run("approve", "claude-code", "--yes", check=True)
    (env.home / ".claude.json").write_text('{"userID": "mine"}\n')
    env.json("start", "claude-code", "--mode", "verified", "--workspace", str(env.ws), "--name", "c", "--detach")
    shared = env.home / ".claude" / ".config.json"
    assert shared.read_text() == '{"userID": "mine"}\n' and shared.stat().st_mode & 0o777 == 0o600
    shared.write_text('{"userID": "mine", "numStartups": 2}\n')  # what a session wrote: never replaced
    env.run("stop", "c", check=True)
    env.json("start", "claude-code", "--mode", "verified", "--workspace", str(env.ws), "--name", "d", "--detach")
    assert "numStartups" in shared.read_text()


def test_claude_shared_config_is_never_written_through_a_link(jail_env):
    env = jail_env
    env.run("approve", "claude-code", "--yes", check=True)
    (env.home / ".claude").mkdir()
    target = env.outside / "victim"
    target.write_text("untouched\n")
    (env.home / ".claude" / ".config.json").symlink_to(target)  # left by an earlier jail
    (env.home / ".claude.json").write_text('{"userID": "mine"}\n')
    # The file is the CLI's own state a jail could write: a link there refuses the start (exit 5,
    # naming it), never followed, never replaced.
    proc = env.run("start", "claude-code", "--mode", "verified", "--workspace", str(env.ws), "--name", "c", "--detach")
    assert proc.returncode == 5 and "symbolic link" in proc.stderr.splitlines()[0], proc.stderr
    assert target.read_text() == "untouched\n"
