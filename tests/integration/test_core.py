"""The core promises, on a real tmux server with real bubblewrap and stand-in CLIs."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import descendants, process_chain

pytestmark = pytest.mark.integration
FP = re.compile(r"^sha256:[0-9a-f]{64}$")


def start(env, *args, provider="codex", mode="isolated", name="app", extra=()):
    cmd = ["start", provider, "--mode", mode, "--workspace", str(env.ws), "--detach", "--json"]
    if name:
        cmd += ["--name", name]
    return env.json(*cmd, *args, *(["--", *extra] if extra else []))


def test_pane_runs_launcher_then_bwrap_then_cli_without_shell(jail_env):
    env = jail_env
    info = start(env)
    assert info["status"] == "running" and FP.match(info["fingerprint"])
    env.report()
    start_cmd = env.tmux("list-panes", "-a", "-F", "#{pane_start_command}").strip()
    assert "tmuxjail.pane.launch" in start_cmd and info["fingerprint"] in start_cmd
    pane_pid = int(env.tmux("list-panes", "-a", "-F", "#{pane_pid}").strip())
    sleepers = [p for p in descendants(pane_pid) if Path(f"/proc/{p}/comm").read_text().strip() == "sleep"]
    assert sleepers, "the stand-in CLI is not under the pane's process"
    chain = process_chain(sleepers[0])
    assert "bwrap" in chain
    assert not {"sh", "bash", "dash", "zsh"} & set(chain[1:]), chain
    # The pane's own process is bwrap (the launcher exec'd it): no Python left resident.
    assert Path(f"/proc/{pane_pid}/comm").read_text().strip() == "bwrap"


def test_options_and_store_carry_the_fingerprint(jail_env):
    env = jail_env
    info = start(env)
    fmt = "#{@tmuxjail_id} #{@tmuxjail_fp} #{@tmuxjail_mode} #{@tmuxjail_provider}"
    pane_opts = env.tmux("display-message", "-p", "-t", info["tmux_pane"], fmt).split()
    sess_opts = env.tmux("show-options", "-t", "=app:", "-v", "@tmuxjail_fp").strip()
    assert pane_opts == [info["id"], info["fingerprint"], "isolated", "codex"]
    assert sess_opts == info["fingerprint"]
    row = sqlite3.connect(env.store).execute("SELECT fingerprint, policy FROM sessions").fetchone()
    assert row[0] == info["fingerprint"]
    from tmuxjail.canon import fingerprint

    assert fingerprint(json.loads(row[1])) == info["fingerprint"]
    for field in ("name", "provider", "mode", "workspace", "created_at", "fingerprint", "status",
                  "tmux_session", "tmux_pane", "private_home"):
        assert field in info


def test_isolated_private_home_env_allowlist_and_workspace(jail_env):
    env = jail_env
    secret = env.home / "secret.txt"
    secret.write_text("real home secret")
    outside = env.outside / "escape"
    info = env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app",
                    "--detach", "--", "--outside", str(outside), "--secret", str(secret),
                    env_extra={"OPENAI_API_KEY": "sk-declared", "UNDECLARED_SECRET": "nope", "LD_PRELOAD": "/x.so"})
    r = env.report()
    assert r["home"] == str(env.home)  # same path ...
    assert "secret.txt" not in r["home-list"]  # ... private content
    assert r["read-secret"] == "denied"
    assert r["write-workspace"] == "ok" and (env.ws / ".standin-write-test").exists()
    assert r["write-outside"] == "denied" and not outside.exists()
    assert r["env-CODEX_HOME"] == f"{env.home}/.codex"
    assert Path(info["private_home"], ".codex").is_dir()
    assert r["env-OPENAI_API_KEY"] == "sk-declared"
    names = set(r["env-names"].split())
    assert "UNDECLARED_SECRET" not in names and "LD_PRELOAD" not in names
    assert not {n for n in names if n.startswith("TMUX")}


def test_compatibility_hides_tmuxjail_state_and_tmux(jail_env):
    env = jail_env
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('default_mode = "compatibility"\n')
    outside = env.outside / "compat-write"
    env.json("start", "codex", "--workspace", str(env.ws), "--name", "c", "--detach", "--",
             "--outside", str(outside), "--secret", str(env.store))
    r = env.report()
    assert r["write-outside"] == "ok" and outside.exists()  # host stays writable
    assert r["read-secret"] == "denied"  # the store is hidden
    assert "env-TMUX" not in r
    # Inside, from the jail's own shell: config read-only, sockets hidden.
    env.json("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--name", "probe", "--detach")
    probe = env.ws / "probe.out"
    sock_dir = Path(env.tmux("display-message", "-p", "#{socket_path}").strip()).parent
    cmd = (f"touch {env.config_dir}/x 2>/dev/null && echo cfg-writable || echo cfg-ro; "
           f"ls {sock_dir} | wc -l; ls {env.home}/.local/share/tmuxjail | wc -l; "
           f"tmux -L {env.socket} ls >/dev/null 2>&1 && echo tmux-reached || echo tmux-blocked")
    env.tmux("send-keys", "-t", "=probe:", f"({cmd}) > {probe}", "Enter")
    import time

    for _ in range(100):
        if probe.exists() and len(probe.read_text().split()) >= 4:
            break
        time.sleep(0.05)
    assert probe.read_text().split() == ["cfg-ro", "0", "0", "tmux-blocked"]


def test_verified_binds_only_baseline_paths(jail_env):
    env = jail_env
    codex_home = env.home / ".codex"
    codex_home.mkdir()
    (codex_home / "auth.json").write_text("{}")
    secret = env.home / "notes.txt"
    secret.write_text("private")
    env.run("approve", "codex", "--yes", check=True)
    info = env.json("start", "codex", "--mode", "verified", "--workspace", str(env.ws), "--name", "v",
                    "--detach", "--", "--outside", str(codex_home / "written"), "--secret", str(secret))
    r = env.report()
    assert r["read-secret"] == "denied"
    assert r["write-outside"] == "ok" and (codex_home / "written").exists()  # approved rw path
    assert set(r["home-list"].split()) <= {".codex", ".standin-persist-codex"}
    assert info["private_home"] is None


def test_list_and_show_json(jail_env):
    env = jail_env
    start(env)
    rows = env.json("list")
    assert [r["name"] for r in rows] == ["app"] and rows[0]["status"] == "running"
    shown = env.json("show", "app")
    assert shown["policy"]["mode"] == "isolated" and shown["policy"]["executable"]["sha256"].startswith("sha256:")
    text = env.run("list", check=True).stdout
    assert text.splitlines()[0].split() == ["NAME", "PROVIDER", "MODE", "STATUS", "AGENT", "KIND", "PANE",
                                            "FINGERPRINT", "WORKSPACE"]


def test_resume_reattaches_live_and_relaunches_gone_with_cli_resume(jail_env):
    env = jail_env
    info = start(env)
    first = env.report()
    assert first["argv"] == "--sandbox danger-full-access --no-daemon"  # our jail refuses nested userns
    again = env.json("resume", "app", "--detach")
    assert again["status"] == "running" and again["tmux_pane"] == info["tmux_pane"]
    env.kill()  # the tmux server goes away, as after a reboot
    env.clear_report()
    resumed = env.json("resume", "app", "--detach")
    assert resumed["fingerprint"] == info["fingerprint"] and resumed["status"] == "running"
    r = env.report()
    # Its own conversation, learned while it ran (never `resume --last`: issue 28.2).
    assert r["argv"] == f"--sandbox danger-full-access --no-daemon resume {first['conversation']}"
    assert r["persisted"] == "run"  # the private home persisted across the resume
    assert r["home"] == str(env.home)


def test_resume_refuses_changed_executable(jail_env):
    env = jail_env
    start(env)
    env.report()
    env.kill()
    with open(env.bin / "codex", "a") as f:
        f.write("# upgraded\n")
    proc = env.run("resume", "app", "--detach", "--json")
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["reasons"] == ["executable"]
    assert "executable" in proc.stderr and "Traceback" not in proc.stderr


def test_resume_refuses_mode_no_longer_allowed(jail_env):
    env = jail_env
    start(env)
    env.kill()  # a relaunch: a live session is reattached, nothing launched (28.12)
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('allowed_modes = ["verified"]\n')
    proc = env.run("resume", "app", "--detach", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["mode"]


def test_resume_refuses_tampered_pane_and_missing_fingerprint(jail_env):
    env = jail_env
    info = start(env)
    env.tmux("set-option", "-p", "-t", info["tmux_pane"], "@tmuxjail_fp", "sha256:" + "0" * 64)
    proc = env.run("resume", "app", "--detach")
    assert proc.returncode == 3 and "@tmuxjail_fp does not match" in proc.stderr, proc.stderr
    db = sqlite3.connect(env.store)
    db.execute("UPDATE sessions SET fingerprint=NULL")
    db.commit()
    proc = env.run("resume", "app", "--detach")
    assert proc.returncode == 3 and "no recorded fingerprint" in proc.stderr


def test_secret_values_never_leak(jail_env):
    env = jail_env
    value = "sk-VERYSECRET-4242"
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "s", "--detach",
             env_extra={"OPENAI_API_KEY": value})
    assert env.report()["env-OPENAI_API_KEY"] == value  # it reached the CLI
    places = [
        env.tmux("list-panes", "-a", "-F", "#{pane_start_command}"),
        env.tmux("show-environment", "-t", "=s"),
        env.tmux("show-environment", "-g"),
    ]
    assert not any(value in p for p in places)
    for f in env.home.rglob("*"):
        if f.is_file() and ".standin" not in f.name:
            assert value.encode() not in f.read_bytes(), f
    assert not list((env.state_dir / "spool").iterdir())  # the spec was read and deleted


def test_ten_concurrent_starts(jail_env):
    env = jail_env
    results = []

    def one(i):
        ws = env.root / f"ws{i}"
        ws.mkdir()
        results.append(env.run("start", "shell", "--mode", "isolated", "--workspace", str(ws), "--detach", "--json"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.returncode for p in results] == [0] * 10, [p.stderr for p in results]
    names = {json.loads(p.stdout)["name"] for p in results}
    assert len(names) == 10
    assert sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0] == 10


def _rows(env):
    if not env.store.exists():
        return 0
    return sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0]


@pytest.mark.parametrize("args,code,needle", [
    (["start", "codex", "--workspace", "/nonexistent/ws", "--detach"], 2, "does not exist"),
    (["start", "nosuch", "--detach"], 2, "unknown provider"),
    (["start", "codex", "--name", "bad:name", "--detach"], 2, "invalid session name"),
    (["start", "codex", "--name", "bad.name", "--detach"], 2, "invalid session name"),
    (["start", "codex", "--mode", "bogus"], 2, "invalid choice"),
    (["resume", "nosuch"], 2, "no session"),
])
def test_bad_input_one_line_no_traceback(jail_env, args, code, needle):
    env = jail_env
    before = _rows(env)
    proc = env.run(*args)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert _rows(env) == before


def test_missing_executable_and_bad_config(jail_env):
    env = jail_env
    (env.bin / "pi").unlink()
    proc = env.run("start", "pi", "--detach")
    assert proc.returncode == 2 and "no executable named pi" in proc.stderr
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text("allowed_modes = [\n")
    proc = env.run("start", "codex", "--detach")
    assert proc.returncode == 2 and "config.toml" in proc.stderr and "Traceback" not in proc.stderr
    (env.config_dir / "config.toml").write_text('allowed_modes = ["isolated"]\n')
    proc = env.run("start", "codex", "--mode", "compatibility", "--detach")
    assert proc.returncode == 4 and "not allowed" in proc.stderr
    assert _rows(env) == 0


def test_duplicate_name_refused(jail_env):
    env = jail_env
    start(env)
    before = _rows(env)
    proc = env.run("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert _rows(env) == before


def test_a_tmux_session_of_that_name_is_refused_and_leaves_nothing(jail_env):
    """new-session itself refuses the name (no has-session before it): the same message and exit
    code, and the row, its events and the spec made meanwhile are gone."""
    env = jail_env
    env.tmux("new-session", "-d", "-s", "app", "sleep 600")  # someone else's session
    proc = env.run("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")
    assert proc.returncode == 2, proc.stderr
    assert "a tmux session named 'app' already exists on this server" in proc.stderr
    assert _rows(env) == 0
    assert sqlite3.connect(env.store).execute("SELECT count(*) FROM events").fetchone()[0] == 0
    assert not list((env.state_dir / "spool").iterdir())
    assert env.tmux("list-panes", "-t", "=app", "-F", "#{pane_start_command}").strip() == '"sleep 600"'


def test_stop_kills_the_tmux_session_and_keeps_the_record(jail_env):
    env = jail_env
    start(env)
    env.run("stop", "app", check=True)
    assert env.tmux("has-session", "-t", "=app", check=False) == ""
    assert env.json("list") == []
    assert [r["status"] for r in env.json("list", "--all")] == ["stopped"]


def test_dry_run_runs_nothing(jail_env):
    env = jail_env
    out = env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--dry-run")
    assert out["sandbox_argv"][0].endswith("bwrap") and "--unshare-pid" in out["sandbox_argv"]
    assert FP.match(out["fingerprint"]) and out["policy"]["mode"] == "isolated"
    assert _rows(env) == 0 and env.tmux("ls", check=False) == ""


def test_doctor_json(env):
    proc = env.run("doctor", "--json")
    data = json.loads(proc.stdout)
    names = {c["check"] for c in data["checks"]}
    assert {"tmux", "bubblewrap", "store"} <= names
    assert proc.returncode == (0 if data["ok"] else 1)


def test_seatbelt_backend_is_auditable_anywhere_but_runs_only_on_a_mac(env):
    out = env.json("start", "codex", "--mode", "verified", "--workspace", str(env.ws), "--dry-run",
                   "--backend", "seatbelt")
    assert out["sandbox_argv"][:2] == ["/usr/bin/sandbox-exec", "-p"]
    # Seatbelt cannot nest: Codex's own sandbox is turned off inside ours.
    assert out["sandbox_argv"][-3:] == ["--no-daemon", "--sandbox", "danger-full-access"]
    assert out["policy"]["backend"] == "seatbelt" and "(deny default)" in out["seatbelt_profile"]
    assert str(env.ws) not in out["seatbelt_profile"] and str(env.ws) in out["seatbelt_params"].values()
    # verified goes out through the session proxy: only its loopback port
    assert out["policy"]["network"] == "proxy" and '(remote ip "localhost:3128")' in out["seatbelt_profile"]
    proc = env.run("start", "codex", "--backend", "seatbelt", "--detach")
    assert proc.returncode == 2 and "only with --dry-run" in proc.stderr and _rows(env) == 0


def test_dry_run_and_preflight_change_nothing_on_disk(jail_env):
    env = jail_env
    import subprocess

    subprocess.run(["git", "init", "-q", str(env.ws)], check=True)
    import shutil

    shutil.rmtree(env.ws / ".git" / "hooks")
    before = sorted(str(p) for p in env.ws.rglob("*"))
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--dry-run")
    assert sorted(str(p) for p in env.ws.rglob("*")) == before
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "g", "--detach")
    assert not (env.ws / ".git" / "hooks").exists()  # nothing needs making: all of .git is read-only


def test_private_files_and_directories_modes(jail_env):
    """tmuxjail's own dirs (state, spool, data, private homes) are 0700 and a launch spec (it
    carries credential values) is 0600 while it exists, whatever the caller's umask. The spec
    lives only until the launcher reads it, so a watcher looks at it while it is there."""
    import os
    import stat
    import time

    env = jail_env
    spool = env.state_dir / "spool"
    seen: dict[str, int] = {}
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                for e in os.scandir(spool):
                    if e.name.endswith(".json"):
                        seen[e.name] = stat.S_IMODE(e.stat(follow_symlinks=False).st_mode)
            except OSError:
                pass
            time.sleep(0)  # yield only: the launcher deletes the spec some 30 ms after it is written

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for name in "abcdefgh":  # until the watcher has seen two specs (a loaded machine may miss some)
            if len(seen) >= 2:
                break
            proc = subprocess.run(
                [sys.executable, "-P", "-m", "tmuxjail", "-L", env.socket, "start", "codex", "--mode", "isolated",
                 "--workspace", str(env.ws), "--name", name, "--detach"],
                cwd=env.ws, env=env.environ(), capture_output=True, text=True, timeout=60,
                preexec_fn=lambda: os.umask(0))
            assert proc.returncode == 0, proc.stderr
    finally:
        done.set()
        watcher.join()
    assert seen, "never saw a spec in the spool"
    assert set(seen.values()) == {0o600}, {k: oct(v) for k, v in seen.items()}
    homes = sorted((env.home / ".local/share/tmuxjail/homes/codex").glob("ws-*"))  # one per workspace
    assert len(homes) == 1, homes
    for d in (env.state_dir, spool, env.home / ".local/share/tmuxjail", *homes):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, (d, oct(d.stat().st_mode))
