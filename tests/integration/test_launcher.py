"""The in-pane launcher refuses anything but the one launch it was prepared for."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shlex
import socket
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_replaying_a_jails_start_command_runs_nothing(jail_env):
    """What tmux-resurrect or a hand-typed copy of pane_start_command would do: the spec was read
    once and deleted, so the replay refuses instead of running anything."""
    env = jail_env
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")
    env.report()
    argv = shlex.split(env.tmux("list-panes", "-t", "=app:", "-F", "#{pane_start_command}").strip())
    env.clear_report()
    # remain-on-exit is set on the session's windows before the replay exists (a window option
    # set in the same command list may come after a fast refusal has already closed the pane).
    env.tmux("set-option", "-gw", "remain-on-exit", "on")  # this test's own server
    pane = env.tmux("new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "=app:", "-c", str(env.ws), *argv).strip()
    ran = env.ws / ".standin-codex.report"
    screen = _dead_screen(env, pane, "refusing", failed=ran.exists)  # the replay ran the CLI: no need to wait
    assert "is gone" in screen and "refusing" in screen, screen
    assert _exit_status(env, pane) in ("3", ""), "the replay exited, but not as a refusal"
    time.sleep(0.3)
    assert not (env.ws / ".standin-codex.report").exists()


def _dead_screen(env, pane: str, needle: str, timeout: float = 15, failed=lambda: False) -> str:
    """The pane's screen once it is dead and shows needle. tmux marks a pane dead when its
    terminal closes, which may be before it has read the last output (this race made the replay
    test flaky) and before it has reaped the process: its exit status comes later, or (seen with
    a pane-died hook on the server, tmux 3.3a) not at all, the process left a zombie."""
    deadline = time.monotonic() + timeout
    while True:
        dead = env.tmux("display-message", "-p", "-t", pane, "#{pane_dead}").strip()
        screen = env.tmux("capture-pane", "-p", "-J", "-S", "-50", "-t", pane)
        if (dead == "1" and needle in screen) or failed() or time.monotonic() > deadline:
            return screen
        time.sleep(0.05)


def _exit_status(env, pane: str, timeout: float = 3) -> str:
    """The dead pane's exit status, once tmux has it ("" if it never reaps the process)."""
    deadline = time.monotonic() + timeout
    while True:
        status = env.tmux("display-message", "-p", "-t", pane, "#{pane_dead_status}").strip()
        if status or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def _spec(env, tmp_path):
    """A real spec: a stored session, and the argv, environment and host layout a dry run of the
    same start builds (the launcher checks them against the policy before anything else). The CLI
    is the login shell, told to print RAN, so a launch that passes every check prints RAN: the
    tests below see a refusal for its own reason."""
    args = ("start", "shell", "--mode", "isolated", "--workspace", str(env.ws))
    dry = env.json(*args, "--dry-run")
    out = env.json(*args, "--name", "s", "--detach")
    row = sqlite3.connect(env.store).execute("SELECT id, policy, fingerprint FROM sessions").fetchone()
    assert row[2] == dry["fingerprint"]
    spec = {"session_id": row[0], "fingerprint": row[2], "policy": json.loads(row[1]),
            "argv": [*dry["cli_argv"], "-c", "echo RAN"], "call": dry["sandbox_call"], "env": dict(dry["policy"]["env_set"]),
            "store": str(env.store), "status_file": str(tmp_path / "spec.status"), "machine": platform.machine(),
            "sandboxed": True, "landlock_scope": True, "layout": dry["host_layout"]}
    return out, spec


def _launch(env, spec, fp, tmp_path, path=None, **kw):
    if path is None:
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(spec))
        path.chmod(0o600)
    return subprocess.run([sys.executable, "-E", "-P", "-m", "tmuxjail.pane.launch", "--fp", fp, str(path)],
                          capture_output=True, text=True, env=env.environ(), timeout=30, **kw)


def test_the_control_spec_launches(jail_env, tmp_path):
    """The control for the refusals below: the same spec, untouched, runs (so each refusal has
    its own reason, not a spec the launcher could never run)."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 0 and "RAN" in proc.stdout, proc.stderr


def test_tampered_policy_is_refused(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    fp = spec["fingerprint"]
    spec["policy"]["workspace_write"] = ["/"]
    proc = _launch(env, spec, fp, tmp_path)
    assert proc.returncode == 3 and "does not match the fingerprint" in proc.stderr and "RAN" not in proc.stdout


def test_fingerprint_the_store_does_not_hold_is_refused(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["policy"]["network"] = "none"  # consistent spec, but not what the store recorded
    from tmuxjail.canon import fingerprint

    fp = spec["fingerprint"] = fingerprint(spec["policy"])
    proc = _launch(env, spec, fp, tmp_path)
    assert proc.returncode == 3 and "store" in proc.stderr and "RAN" not in proc.stdout


def test_stop_will_not_kill_a_tmux_session_that_is_not_ours(jail_env):
    env = jail_env
    env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")
    # Another session first: killing the server's only session makes it exit (exit-empty), and a
    # new-session racing that exit fails ("server exited unexpectedly").
    env.tmux("new-session", "-d", "-s", "holder", "sleep 600")
    env.tmux("kill-session", "-t", "=app")
    env.tmux("new-session", "-d", "-s", "app", "sleep 600")  # someone else's session, same name
    proc = env.run("stop", "app")
    assert proc.returncode == 2 and "not this tmuxjail session" in proc.stderr
    assert env.tmux("has-session", "-t", "=app", check=False) == ""  # still there


def test_stopped_session_is_refused(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    env.run("stop", "s", check=True)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 3 and "store does not hold" in proc.stderr and "RAN" not in proc.stdout


def test_a_store_check_that_dies_refuses_the_launch(jail_env, tmp_path):
    """The store check runs in the launcher's helper child, beside the rest of the launch (issue
    18.3). Here that child really dies before it answers (SQLite cannot be loaded in it): no
    answer is not yes, and nothing runs."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o600)
    stub = "import sys; sys.modules['_sqlite3'] = None; from tmuxjail.pane.launch import main; main(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-E", "-P", "-c", stub, "--fp", spec["fingerprint"], str(path)],
                          capture_output=True, text=True, env=env.environ(), timeout=30)
    assert proc.returncode == 3 and "store check gave no answer" in proc.stderr and "RAN" not in proc.stdout, proc.stderr
    assert "Traceback" not in proc.stderr


def test_spec_owned_by_someone_else_is_refused(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    if os.getuid() == 0:
        path = tmp_path / "theirs.json"
        path.write_text(json.dumps(spec))
        os.chown(path, 65534, 65534)
    else:  # an ordinary user cannot give a file away: someone else's, which it may read but never delete
        path = Path("/etc/passwd")
    proc = _launch(env, spec, spec["fingerprint"], tmp_path, path=path)
    assert proc.returncode == 3 and "not owned by you" in proc.stderr, proc.stderr
    assert "RAN" not in proc.stdout


def test_symlinked_spec_is_refused(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    real = tmp_path / "real.json"
    real.write_text(json.dumps(spec))
    real.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path, path=link)
    assert proc.returncode == 3 and "symbolic links" in proc.stderr and "RAN" not in proc.stdout, proc.stderr
    assert real.exists()


def test_unknown_machine_is_refused_not_run_without_seccomp(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["machine"] = "mips"
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 5 and "no seccomp filter" in proc.stderr and "RAN" not in proc.stdout


def _no_landlock():
    """preexec_fn: from here on the landlock_* syscalls fail with ENOSYS, as on a kernel without
    Landlock (a seccomp filter, inherited by everything this process starts)."""
    ins = [struct.pack("<HBBI", *i) for i in (
        (0x20, 0, 0, 0),             # ld nr
        (0x35, 0, 2, 444),           # nr >= landlock_create_ruleset ? next : allow
        (0x35, 1, 0, 447),           # nr > landlock_restrict_self ? allow : next
        (0x06, 0, 0, 0x00050000 | 38),  # ENOSYS
        (0x06, 0, 0, 0x7FFF0000),    # allow
    )]
    prog = ctypes.create_string_buffer(b"".join(ins))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    fprog = Fprog(len(ins), ctypes.addressof(prog))
    if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0):
        raise OSError(ctypes.get_errno(), "seccomp")


def test_landlock_failure_refuses_the_launch(jail_env, tmp_path):
    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["landlock_scope"] = True
    proc = _launch(env, spec, spec["fingerprint"], tmp_path, preexec_fn=_no_landlock)
    assert proc.returncode == 5 and "abstract unix sockets" in proc.stderr and "RAN" not in proc.stdout


def test_strict_start_without_landlock_refuses(jail_env):
    env = jail_env

    def start(name, mode="isolated"):
        return subprocess.run([sys.executable, "-P", "-m", "tmuxjail", "-L", env.socket, "start", "shell", "--mode",
                               mode, "--workspace", str(env.ws), "--name", name, "--detach"], cwd=env.ws,
                              env=env.environ(), capture_output=True, text=True, timeout=60,
                              preexec_fn=_no_landlock)

    proc = start("n")
    assert proc.returncode == 5 and "Landlock" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert env.tmux("ls", check=False).strip() == ""
    proc = start("c", mode="compatibility")  # compatibility never needed it
    assert proc.returncode == 0, proc.stderr
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text('accept_missing_guards = ["abstract-unix-sockets"]\n')
    proc = start("a")  # the operator accepted the gap
    assert proc.returncode == 0, proc.stderr


def test_landlock_scope_blocks_abstract_sockets_and_signals(tmp_path):
    """The scope the launcher applies before exec'ing bwrap, on the real kernel: no connecting to
    an abstract socket made outside, no signal to a process outside; the process itself is fine."""
    from tmuxjail.sandbox import landlock

    if landlock.abi() < landlock.MIN_ABI:
        pytest.skip(f"Landlock ABI {landlock.abi()} < {landlock.MIN_ABI} here")
    name = f"tj-scope-{os.getpid()}-{time.monotonic_ns()}"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind("\0" + name)
    srv.listen(1)
    outside = subprocess.Popen(["sleep", "60"])
    code = f"""
import os, socket
from tmuxjail.sandbox import landlock
landlock.scope_self()
try:
    os.kill({outside.pid}, 0); print("SIGNAL_OUTSIDE")
except PermissionError:
    print("signal-refused")
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\\0{name}"); print("ABSTRACT_OUTSIDE")
except PermissionError:
    print("abstract-refused")
os.kill(os.getpid(), 0); print("self-ok")
"""
    try:
        proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=30)
    finally:
        srv.close()
        outside.kill()
        outside.wait()
    assert proc.stdout.split() == ["signal-refused", "abstract-refused", "self-ok"], (proc.stdout, proc.stderr)


def test_inherited_fds_do_not_reach_the_jail(jail_env, tmp_path):
    """The launcher closes every fd but stdio and its own: an fd its caller left open (here, one
    on a secret file) is not inherited by bubblewrap and the jailed CLI."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    probe = env.ws / "fds.sh"
    probe.write_text("for f in /proc/$$/fd/*; do readlink $f; done > ./fds.out\nexit 0\n")
    spec["argv"] = [*spec["argv"][:-2], str(probe)]  # the login shell runs the probe
    secret = env.outside / "secret-for-fd"
    secret.write_text("s")
    fd = os.open(secret, os.O_RDONLY)
    try:
        proc = _launch(env, spec, spec["fingerprint"], tmp_path, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert proc.returncode == 0, proc.stderr
    seen = (env.ws / "fds.out").read_text()
    assert str(secret) not in seen, seen


def test_split_helper_refuses_another_fingerprint(jail_env):
    """`_pane` (what a split runs) with a fingerprint that is not the session's refuses before it
    writes a spec or marks the pane as jailed."""
    env = jail_env
    info = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "j", "--detach")
    bad = "sha256:" + "0" * 64
    pane = env.tmux("new-window", "-d", "-P", "-F", "#{pane_id}", "-t", "=j:", "-c", str(env.ws),
                    sys.executable, "-P", "-m", "tmuxjail", "_pane", "--id", info["id"], "--fp", bad).strip()
    screen = _dead_screen(env, pane, "refusing")
    assert "not the session's" in screen, screen
    assert _exit_status(env, pane) in ("3", "")
    assert env.tmux("display-message", "-p", "-t", pane, "#{@tmuxjail_fp}").strip() in ("", info["fingerprint"])
    assert env.tmux("show-options", "-pqv", "-t", pane, "@tmuxjail_fp").strip() == ""
    events = sqlite3.connect(env.store).execute("SELECT kind FROM events").fetchall()
    assert ("pane",) not in events, events


def test_unknown_machine_refuses_before_anything_runs(jail_env):
    """start on a machine the seccomp filter does not know refuses (exit 5) before it records or
    launches anything; the launcher's own refusal is the second line, not the only one. The
    machine name is the only thing faked: tmux, the store and bubblewrap are real."""
    env = jail_env
    code = ("import os; u = os.uname(); os.uname = lambda: os.uname_result((*u[:4], 'mips')); "
            "from tmuxjail.cli import main; main()")
    proc = subprocess.run([sys.executable, "-P", "-c", code, "-L", env.socket, "start", "shell", "--mode", "isolated",
                           "--workspace", str(env.ws), "--name", "m", "--detach"],
                          cwd=env.ws, env=env.environ(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 5 and "no seccomp filter for mips" in proc.stderr, proc.stderr
    assert env.tmux("ls", check=False).strip() == ""
    if env.store.exists():
        assert sqlite3.connect(env.store).execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


def test_a_launcher_started_with_sigchld_ignored_still_launches(jail_env, tmp_path):
    """A pane's program may inherit SIGCHLD ignored (a shell or tmux hook that set it): the kernel
    then reaps the launcher's helper itself, and waiting for it finds no child. The launch goes on."""
    import signal

    env = jail_env
    _, spec = _spec(env, tmp_path)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path,
                   preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    assert proc.returncode == 0 and "RAN" in proc.stdout, proc.stderr
