"""The in-pane launcher's checks, at unit level: survivors of launch.py's mutation run (issue 29).
Each test states what a user or an attacker relies on; a real launch: tests/integration/
test_kills_launch_jail.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_policy import LAYOUT, resolve

from tmuxjail.pane import executable, launch, narrow, refuse
from tmuxjail.pane import helper as pane_helper
from tmuxjail.pane import spec as pane_spec
from tmuxjail.sandbox import landlock
from tmuxjail.sandbox.bwrap import Bwrap
from tmuxjail.store import Store


@contextmanager
def no_hang(seconds: int = 60):
    """The code under test must return: a call that blocks forever fails the test instead."""
    def expired(*_):
        raise TimeoutError("blocked: the call never returned")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _exe_policy(path) -> dict:
    return {"executable": {"path": str(path), "sha256": "sha256:" + "0" * 64, "extra": []}}


# -- the executable is opened as the file the policy names, never through a link -------------------

def test_an_executable_path_that_is_now_a_link_is_refused(tmp_path, capsys):
    """The policy hashed a regular file at that path; a link planted there since (by a session
    that can write the install) would have the launcher check and bind the link's target."""
    target = tmp_path / "elsewhere"
    target.write_bytes(b"#!/bin/sh\n")
    link = tmp_path / "codex"
    link.symlink_to(target)
    with pytest.raises(SystemExit) as exit_:
        executable.open_executables(_exe_policy(link))
    assert exit_.value.code == refuse.EXIT_REFUSED and "cannot open the CLI's executable" in capsys.readouterr().err


def test_an_executable_path_that_is_now_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    """A FIFO planted at the CLI's path would block the launcher's open forever (no writer): the
    pane would hang instead of saying why it refuses."""
    fifo = tmp_path / "codex"
    os.mkfifo(fifo)
    with no_hang(), pytest.raises(SystemExit) as exit_:
        executable.open_executables(_exe_policy(fifo))
    assert exit_.value.code == refuse.EXIT_REFUSED and "not a regular file" in capsys.readouterr().err


# -- the store's digest cache: a digest only for the very stat identity it was made for -------------

def test_the_store_answers_a_cached_digest_only_for_the_same_stat_identity(tmp_path):
    """The launcher skips hashing a CLI the cache vouches for (a 100 MB binary costs seconds on
    every start); a file changed since (another stat key) gets no digest, so it is hashed."""
    db = tmp_path / "store.db"
    s = Store(db)
    s.put_digest("/opt/a", (1, 2, 3), "sha256:aa")
    s.put_digest("/opt/b", (4, 5, 6), "sha256:bb")
    s.close()
    fp, digests = pane_helper.stored_fingerprint(str(db), "no-such-session",
                                            [["/opt/a", [1, 2, 3]], ["/opt/b", [4, 5, 7]], ["/opt/c", [1]]])
    assert fp is None
    assert digests == ["sha256:aa", "", ""]


# -- the discovery trace's cap ---------------------------------------------------------------------

@pytest.mark.skipif(not os.access("/usr/bin/strace", os.X_OK), reason="needs strace (scripts/test.sh installs it)")
def test_a_trace_cap_that_is_a_link_is_refused(tmp_path, capsys):
    """The cap file next to the trace is written by `discover`; a link there (to a file holding a
    huge number) would lift the cap the config set on the tracer's output."""
    from tmuxjail.pane.strace import CAP_FILE

    run = tmp_path / "discover" / "run1"
    run.mkdir(parents=True)
    spec = {"store": str(tmp_path / "store.db"), "trace": str(run / "trace")}
    (run / CAP_FILE).write_text("1048576")
    assert launch.traced(spec)  # the control: a plain cap file is read
    os.unlink(run / "trace")
    (run / CAP_FILE).unlink()
    (tmp_path / "big").write_text(str(1 << 40))
    (run / CAP_FILE).symlink_to(tmp_path / "big")
    with pytest.raises(SystemExit) as exit_:
        launch.traced(spec)
    assert exit_.value.code == refuse.EXIT_REFUSED and "trace cap" in capsys.readouterr().err


# -- the proxy's readiness --------------------------------------------------------------------------

def _reaped_child() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def _helper(ready_bytes: bytes) -> pane_helper.Helper:
    r, w = os.pipe()
    os.write(w, ready_bytes)
    os.close(w)
    # The helper already reaped (store_holds did, when a discovery run's proxy detached from it).
    return pane_helper.Helper(_reaped_child(), -1, -1, r, -1, -1, -1)


def test_the_proxy_socket_is_taken_from_a_helper_that_was_already_reaped():
    with no_hang():
        assert pane_helper.proxy_ready(_helper(b"/run/tmuxjail/p.sock\n")) == "/run/tmuxjail/p.sock"


@pytest.mark.parametrize("said", [b"", b"!cannot listen"])
def test_a_proxy_that_exits_before_it_listens_refuses_the_launch(capsys, said):
    """The helper died before saying where its proxy listens (EOF, with nothing or no whole line):
    the launch stops with the reason, it does not wait forever on a pipe nobody writes."""
    with no_hang(), pytest.raises(SystemExit) as exit_:
        pane_helper.proxy_ready(_helper(said))
    assert exit_.value.code == refuse.EXIT_UNAVAILABLE and "network proxy" in capsys.readouterr().err


# -- Landlock: a spec that drops the scope where the kernel has it is tampered ---------------------

def _verify_spec(tmp_path, pol, scope):
    layout = {"top": LAYOUT.top, "tmux_dirs": list(LAYOUT.tmux_dirs), "tmux_files": list(LAYOUT.tmux_files),
              "etc_secrets": list(LAYOUT.etc_secrets)}
    call = Bwrap("/usr/bin/bwrap").call(pol, [], LAYOUT).asdict()
    path = str(tmp_path / "spec.json")
    return {"argv": [pol["executable"]["path"]], "call": call, "sandboxed": True, "env": dict(pol["env_set"]), "layout": layout,
            "landlock_scope": scope, "status_file": path[:-len(".json")] + ".status"}, path


@pytest.mark.parametrize("abi,refused", [(landlock.MIN_ABI, True), (landlock.MIN_ABI + 1, True),
                                         (landlock.MIN_ABI - 1, False)])
def test_a_spec_without_the_landlock_scope_is_refused_on_every_kernel_that_has_it(
        tmp_path, monkeypatch, capsys, abi, refused):
    """The start asks for the abstract-socket scope wherever the kernel offers it (ABI MIN_ABI
    and later); a spec that turned it off there is tampered. Older kernels cannot scope."""
    pol = resolve("isolated")
    spec, path = _verify_spec(tmp_path, pol, True)
    monkeypatch.setattr(landlock, "abi", lambda: abi)
    pane_spec.verify(spec, pol, path)  # the control: with the scope, every kernel passes
    spec["landlock_scope"] = False
    if refused:
        with pytest.raises(SystemExit) as exit_:
            pane_spec.verify(spec, pol, path)
        assert exit_.value.code == refuse.EXIT_REFUSED and "Landlock setting" in capsys.readouterr().err
    else:
        pane_spec.verify(spec, pol, path)


def test_a_spec_argv_holding_anything_but_strings_is_refused_as_tampered(tmp_path, capsys):
    """Every word of the argv must be a string: a number after a CLI the policy names would pass
    the prefix checks and then crash the launcher at exec, a traceback instead of a refusal."""
    pol = resolve("isolated")
    spec, path = _verify_spec(tmp_path, pol, True)
    spec["argv"] = [*spec["argv"], "--flag", 7]
    with pytest.raises(SystemExit) as exit_:
        pane_spec.verify(spec, pol, path)
    assert exit_.value.code == refuse.EXIT_REFUSED and "argv does not follow" in capsys.readouterr().err


# -- root only: the pids cgroup, in a child (joining moves the process for good) -------------------

root_only = pytest.mark.skipif(os.getuid() != 0, reason="only a root-run launcher joins a pids cgroup")


def _in_child(fn) -> tuple[int, str]:
    """fn() run in a forked child: (its exit code, its stderr); 99 for an uncaught exception."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.dup2(w, 2)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - not pytest's capture: the parent reads it
            fn()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(2, f"UNCAUGHT {exc!r}".encode())
            code = 99
        sys.stderr.flush()
        os._exit(code)
    os.close(w)
    err = b""
    while chunk := os.read(r, 4096):
        err += chunk
    os.close(r)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), err.decode(errors="replace")


def _groups() -> set[str]:
    from tmuxjail.sandbox import pids

    found = pids.hierarchy()
    try:
        return set(os.listdir(f"{found[0]}/{pids.GROUP}")) if found else set()
    except OSError:
        return set()


@root_only
def test_a_root_run_policy_without_a_process_limit_joins_no_pids_group():
    """No nproc in the policy (its config sets none): the root-run launch goes on, in no group."""
    before = _groups()
    code, err = _in_child(lambda: narrow.root_process_limit({"limits": {}}, "kl-no-limit"))
    assert (code, err) == (0, "")
    assert not {g for g in _groups() - before if g.startswith("kl-no-limit")}


@root_only
def test_a_pids_group_the_kernel_refuses_is_a_one_line_refusal():
    """A limit the cgroup refuses (not a number it takes) stops the root-run launch with the
    reason, never a traceback and never a jail without its process limit."""
    from tmuxjail.sandbox import pids

    found = pids.hierarchy()
    if found is None:
        pytest.skip("no pids cgroup controller on this host")
    before = _groups()
    try:
        code, err = _in_child(lambda: narrow.root_process_limit({"limits": {"nproc": -5}}, "kl-bad-limit"))
        assert code == refuse.EXIT_UNAVAILABLE and "cannot put this root-run jail into its pids cgroup" in err, (code, err)
        assert "UNCAUGHT" not in err
    finally:
        for g in _groups() - before:
            if g.startswith("kl-bad-limit"):
                os.rmdir(f"{found[0]}/{pids.GROUP}/{g}")


@root_only
def test_the_helper_without_a_proxy_leaves_the_pane_and_joins_no_group(tmp_path):
    """Without a proxy the helper only answers the store check and sweeps finished jails' groups:
    it lets go of the pane's terminal first (nobody waits on the sweep) and joins no pids group
    (only a proxy's threads count toward the jail's)."""
    db = tmp_path / "store.db"
    Store(db).close()
    req = {"store": str(db), "session_id": "kl-helper", "detach": False, "proxy": None, "files": [], "nproc": 64}
    out_r, out_w = os.pipe()

    def run() -> None:
        ask_r, ask_w = os.pipe()
        _store_r, store_w = os.pipe()
        os.write(ask_w, json.dumps(req).encode())
        os.close(ask_w)
        pane_helper.helper(os.getppid(), ask_r, store_w, -1, -1, -1, -1)
        still_open = [fd for fd in (0, 1, 2) if _is_open(fd)]
        with open("/proc/self/cgroup") as f:
            cgroup = f.read()
        os.write(out_w, json.dumps({"open": still_open, "joined": "kl-helper" in cgroup}).encode())

    before = _groups()
    try:
        code, err = _in_child(run)
        os.close(out_w)
        got = json.loads(os.read(out_r, 65536) or b"{}")
        assert code == 0 and got == {"open": [], "joined": False}, (code, err, got)
    finally:
        os.close(out_r)
        from tmuxjail.sandbox import pids

        for g in _groups() - before:
            if g.startswith("kl-helper"):
                os.rmdir(f"{pids.hierarchy()[0]}/{pids.GROUP}/{g}")


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


# -- the spec itself, the bubblewrap options, the exec --------------------------------------------

CALL_TAMPERING = {
    "option-cut-short": lambda c: c["setup"].__setitem__(-1, c["setup"][-1][:-1]),
    "option-dropped": lambda c: c["setup"].pop(1),
    "option-added": lambda c: c["setup"].append(["--bind", "/", "/"]),
    "mark-dropped": lambda c: c["beneath"].pop(),
    "mark-moved-inward": lambda c: c["beneath"][0].__setitem__(1, c["beneath"][0][1] + "/sub"),
    "seal-dropped": lambda c: c["seal"].pop(0),
    "prefix-changed": lambda c: c["prefix"].__setitem__(-2, "--nproc=999999"),
    "section-missing": lambda c: c.pop("seal"),
    "no-call": lambda c: c.clear(),
}


@pytest.mark.parametrize("how", CALL_TAMPERING)
def test_a_spec_call_that_is_not_the_one_the_policy_gives_is_refused(tmp_path, capsys, how):
    """The launcher derives the bwrap call from the fingerprinted policy and the layout and runs
    only that: a spec whose call differs anywhere (an option, its operands, a mark of a bind to
    open from an fd, the seal, the process limit) is tampered."""
    pol = resolve("isolated")
    spec, path = _verify_spec(tmp_path, pol, True)
    assert pane_spec.verify(spec, pol, path) is not None  # the control
    CALL_TAMPERING[how](spec["call"])
    with pytest.raises(SystemExit) as exit_:
        pane_spec.verify(spec, pol, path)
    assert exit_.value.code == refuse.EXIT_REFUSED and "does not follow" in capsys.readouterr().err


def test_a_spec_the_launcher_cannot_delete_is_still_read_once(tmp_path):
    """The spec is deleted as soon as it is open (it holds credential values); a directory that
    does not let the launcher delete it does not stop the launch: the spec is read all the same."""
    import shutil
    import tempfile

    # pytest's own temp tree is root's alone: nobody could not reach a spec there.
    base = tempfile.mkdtemp(prefix="kl-spec-") if os.getuid() == 0 else str(tmp_path)
    os.chmod(base, 0o755)
    d = Path(base) / "specs"
    d.mkdir()
    path = d / "spec.json"
    path.write_text('{"session_id": "s1"}')
    uid = 65534 if os.getuid() == 0 else os.getuid()  # root deletes anything: read it as nobody
    os.chown(d, uid, -1)
    os.chown(path, uid, -1)
    os.chmod(path, 0o600)
    os.chmod(d, 0o500)

    def read() -> None:
        if os.getuid() == 0:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        spec = pane_spec.read_spec(str(path))
        if spec != {"session_id": "s1"}:
            raise SystemExit(7)
    try:
        code, err = _in_child(read)
        assert (code, err) == (0, ""), (code, err)
        assert path.exists()  # could not be deleted, and that stopped nothing
    finally:
        os.chmod(d, 0o700)
        if base != str(tmp_path):
            shutil.rmtree(base)


def test_an_exec_that_fails_is_a_one_line_refusal(tmp_path):
    """bubblewrap (or an unguarded CLI) gone between the checks and the exec: the pane says which
    program could not run and why, not a traceback."""
    missing = str(tmp_path / "gone" / "bwrap")
    code, err = _in_child(lambda: launch.exec_closing([missing, "--version"], {}, ()))
    assert code == refuse.EXIT_UNAVAILABLE and f"cannot run {missing}" in err and "UNCAUGHT" not in err, (code, err)


def test_a_cli_written_in_place_after_its_check_is_refused(tmp_path, capsys):
    """The launcher checked the opened file; a write into the same file before bubblewrap runs
    (the fd would then show the new bytes) changes its stat identity: refused at the last moment."""
    import hashlib

    exe = tmp_path / "codex"
    exe.write_bytes(b"#!/bin/sh\necho approved\n")
    pol = {"executable": {"path": str(exe), "sha256": "sha256:" + hashlib.sha256(exe.read_bytes()).hexdigest(),
                          "extra": []}}
    opened = executable.open_executables(pol)
    try:
        executable.exe_checked(opened, [])
        executable.exe_unchanged(opened)  # the control: untouched, it goes on
        with open(exe, "r+b") as f:
            f.write(b"#!/bin/sh\necho swapped\n")
        with pytest.raises(SystemExit) as exit_:
            executable.exe_unchanged(opened)
        assert exit_.value.code == refuse.EXIT_REFUSED and "was modified while" in capsys.readouterr().err
    finally:
        for _, _, fd, _ in opened:
            os.close(fd)


# -- found after the first triage: the launcher's own usage, the proxy's reason, the status file -----

@pytest.mark.parametrize("argv", [["--fp", "sha256:x"], ["--fp"], [], ["--xx", "sha256:x", "/s.json"],
                                  ["--fp", "sha256:x", "/s.json", "extra"]])
def test_a_launcher_called_any_other_way_prints_its_usage_and_does_nothing(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        launch.main(argv)
    assert exit_.value.code == 2 and "usage: python -m tmuxjail.pane.launch --fp FINGERPRINT SPEC" in capsys.readouterr().err


def test_a_proxy_that_could_not_start_gives_its_own_reason(capsys):
    """The helper's `!reason` line is what the user sees (a port in use, a limit): not a bare 'it exited'."""
    with no_hang(), pytest.raises(SystemExit) as exit_:
        pane_helper.proxy_ready(_helper(b"!cannot bind the proxy socket: Address in use\n"))
    err = capsys.readouterr().err
    assert exit_.value.code == refuse.EXIT_UNAVAILABLE and "cannot bind the proxy socket: Address in use" in err, err


@pytest.mark.parametrize("status", ["/tmp/elsewhere.status", None])
def test_a_spec_whose_status_file_is_not_its_own_is_refused(tmp_path, status):
    """The status file is where the launcher reports the CLI's exit for `tmuxjail list`: a spec
    pointing it anywhere but beside itself (or /dev/null, an extra pane) is tampered."""
    pol = resolve("isolated")
    spec, path = _verify_spec(tmp_path, pol, True)
    pane_spec.verify(spec, pol, path)  # the control
    spec["status_file"] = os.devnull
    pane_spec.verify(spec, pol, path)
    spec["status_file"] = status
    with pytest.raises(SystemExit) as exit_:
        pane_spec.verify(spec, pol, path)
    assert exit_.value.code == refuse.EXIT_REFUSED


def test_a_spec_that_leaves_out_its_sandbox_setting_is_taken_as_sandboxed(tmp_path):
    pol = resolve("isolated")
    spec, path = _verify_spec(tmp_path, pol, True)
    del spec["sandboxed"]
    pane_spec.verify(spec, pol, path)
    spec["sandboxed"] = False
    with pytest.raises(SystemExit):
        pane_spec.verify(spec, pol, path)


@pytest.mark.parametrize("argv", ["/usr/bin/bwrap --bind / / sh", [], {}, 7])
def test_a_spec_argv_that_is_no_list_of_words_is_refused_as_tampered(tmp_path, capsys, argv):
    """A string would pass a check of its characters one by one; an empty list has no command."""
    pol = resolve("isolated")
    spec, path = _verify_spec(tmp_path, pol, True)
    spec["argv"] = argv
    with pytest.raises(SystemExit) as exit_:
        pane_spec.verify(spec, pol, path)
    assert exit_.value.code == refuse.EXIT_REFUSED and "argv does not follow" in capsys.readouterr().err


def test_every_executable_is_checked_though_the_cache_vouched_for_the_first(tmp_path, capsys):
    """The policy names the CLI and its interpreter (a node script and node): the cache vouching for
    one must not end the check of the others."""
    import hashlib

    good, bad = tmp_path / "node", tmp_path / "codex"
    good.write_bytes(b"node")
    bad.write_bytes(b"swapped")
    approved_good = "sha256:" + hashlib.sha256(b"node").hexdigest()
    approved_bad = "sha256:" + hashlib.sha256(b"the approved codex").hexdigest()
    fds = [os.open(good, os.O_RDONLY), os.open(bad, os.O_RDONLY)]
    try:
        with pytest.raises(SystemExit) as exit_:
            executable.exe_checked([(str(good), approved_good, fds[0], []), (str(bad), approved_bad, fds[1], [])],
                               [approved_good, ""])
        assert exit_.value.code == refuse.EXIT_REFUSED and str(bad) in capsys.readouterr().err
    finally:
        for fd in fds:
            os.close(fd)


@root_only
def test_a_root_run_proxy_that_cannot_join_the_jails_pids_group_still_serves(tmp_path):
    """The proxy's join of the jail's pids group is a bound on top of MAX_CONNECTIONS, not a
    condition of serving: a group the kernel refuses (a limit it does not take) leaves the proxy
    listening and answering, never a jail whose proxy died before its first request."""
    import socket
    import time

    db = tmp_path / "store.db"
    Store(db).close()
    launcher = os.getpid()  # this process stands for the launcher: the proxy serves while it lives
    req = {"store": str(db), "session_id": "kl-proxy-join", "detach": False, "files": [], "nproc": -5,
           "proxy": {"allow_domains": [], "resolve": []}}
    ask_r, ask_w = os.pipe()
    store_r, store_w = os.pipe()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    os.write(ask_w, json.dumps(req).encode())
    os.close(ask_w)
    os.close(go_w)  # the launcher has exec'd
    # bubblewrap's report of its child: here a process in a network namespace of its own
    jail = subprocess.Popen(["unshare", "-rn", "sleep", "60"])
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    os.write(info_w, json.dumps({"child-pid": jail.pid}).encode())
    os.close(info_w)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.close(store_r)
            os.close(block_r)
            pane_helper.helper(launcher, ask_r, store_w, ready_w, go_r, info_r, block_w)
        finally:
            os._exit(0)
    try:
        for fd in (ask_r, store_w, ready_w, go_r, info_r, block_w):
            os.close(fd)
        with no_hang(30):
            line = os.read(ready_r, 4096).decode().strip()
            assert line.startswith("/"), line
            c = socket.socket(socket.AF_UNIX)
            c.settimeout(20)
            answered = b""
            for _ in range(50):  # the proxy loads its code after the go pipe's EOF
                try:
                    c.connect(line)
                    c.sendall(b"CONNECT nowhere.invalid:443 HTTP/1.1\r\nHost: nowhere.invalid:443\r\n\r\n")
                    answered = c.recv(64)
                    break
                except OSError:
                    c.close()
                    c = socket.socket(socket.AF_UNIX)
                    c.settimeout(20)
                    time.sleep(0.1)
            c.close()
        assert answered.startswith(b"HTTP/1."), answered
        assert os.read(block_r, 1) == b"1"  # bubblewrap would now run the command
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        jail.kill()
        jail.wait()
        os.close(ready_r)
        os.close(store_r)
        os.close(block_r)
        from tmuxjail.sandbox import pids

        found = pids.hierarchy()
        for g in _groups():
            if g.startswith("kl-proxy-join") and found:
                os.rmdir(f"{found[0]}/{pids.GROUP}/{g}")
