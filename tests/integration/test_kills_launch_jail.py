"""The in-pane launcher, run for real on a real spec (test_launcher._spec): survivors of launch.py's
mutation run (issue 29) that only a launch shows. Each spec is made legitimately, then one field
is changed, with the store updated to match where the change is the policy's."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_launcher import _launch, _spec
from test_unpinned_checks import _restore

pytestmark = pytest.mark.integration


def _rewrap(spec: dict) -> None:
    """The spec's bubblewrap call rebuilt from its (changed) policy, as a start would build it."""
    from tmuxjail.sandbox import HostLayout
    from tmuxjail.sandbox.bwrap import Bwrap

    layout = HostLayout(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec["layout"].items()})
    path = spec["call"]["bwrap"]
    assert spec["call"] == Bwrap(path).call(json.loads(json.dumps(spec["old_policy"])), [], layout).asdict()
    spec["call"] = Bwrap(path).call(spec["policy"], [], layout).asdict()
    del spec["old_policy"]


def _change(env, spec: dict, edit) -> None:
    spec["old_policy"] = json.loads(json.dumps(spec["policy"]))
    edit(spec["policy"])
    _rewrap(spec)
    _restore(env, spec)


def _compat_spec(env, tmp_path) -> dict:
    """A compatibility session's real spec (as test_unpinned_checks builds one)."""
    args = ("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws))
    dry = env.json(*args, "--dry-run")
    env.json(*args, "--name", "c", "--detach")
    row = sqlite3.connect(env.store).execute(
        "SELECT id, policy, fingerprint FROM sessions WHERE name = 'c' AND status != 'stopped'").fetchone()
    return {"session_id": row[0], "fingerprint": row[2], "policy": json.loads(row[1]),
            "argv": [*dry["cli_argv"], "-c", "echo RAN"], "call": dry["sandbox_call"], "env": dict(dry["policy"]["env_set"]),
            "store": str(env.store), "status_file": str(tmp_path / "spec.status"), "machine": platform.machine(),
            "sandboxed": True, "landlock_scope": True, "layout": dry["host_layout"]}


def test_the_panes_terminal_type_reaches_the_jail_and_none_is_no_error(jail_env, tmp_path):
    """The CLI draws for the terminal tmux gave the pane (TERM), not for the policy's fixed one;
    a pane started without TERM still launches."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["argv"][-1] = 'echo "RAN term=$TERM"'
    for term, want in (("tmuxjail-test-term", "RAN term=tmuxjail-test-term"), (None, "RAN term=")):
        environ = {k: v for k, v in env.environ().items() if k != "TERM"}
        if term is not None:
            environ["TERM"] = term
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(spec))
        path.chmod(0o600)
        proc = subprocess.run([sys.executable, "-E", "-P", "-m", "tmuxjail.pane.launch", "--fp", spec["fingerprint"], str(path)],
                              capture_output=True, text=True, env=environ, timeout=60)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (term, proc.returncode, proc.stderr)
        line = [w for w in proc.stdout.splitlines() if w.startswith("RAN")]
        assert line and (line[0] == want if term else not line[0].startswith("RAN term=tmuxjail")), (term, proc.stdout)


def test_a_spec_that_leaves_out_its_sandbox_setting_still_has_its_cli_checked(jail_env, tmp_path):
    """A spec without "sandboxed" is a sandboxed one (the default): the CLI it runs must still
    be the file whose digest the policy holds. Here the policy's digest is not the shell's."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["policy"]["executable"]["sha256"] = "sha256:" + "1" * 64
    _restore(env, spec)
    del spec["sandboxed"]
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 3 and "changed since this session's policy" in proc.stderr, (proc.returncode, proc.stderr)
    assert "RAN" not in proc.stdout


def test_a_compatibility_jail_runs_the_cli_it_may_have_updated_itself(jail_env, tmp_path):
    """A compatibility session writes its own install (a CLI updating itself): its launcher does
    not pin the CLI to the digest hashed at the start, nor bind it read-only over its path."""
    env = jail_env
    spec = _compat_spec(env, tmp_path)
    spec["policy"]["executable"]["sha256"] = "sha256:" + "1" * 64  # the file as it was at the start
    _restore(env, spec)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 0 and "RAN" in proc.stdout, (proc.returncode, proc.stderr)


def _perf_probe(machine: str) -> str:
    from tmuxjail.sandbox.seccomp import SYSCALLS

    nr = SYSCALLS["perf_event_open"][0 if machine == "x86_64" else 1]
    return (f"python3 -c 'import ctypes; c = ctypes.CDLL(None, use_errno=True); "
            f"r = c.syscall({nr}, None, 0, -1, -1, 0); print(\"RAN perf\", r, ctypes.get_errno())'")


def test_a_strict_jail_is_refused_perf_event_open_and_a_compatibility_jail_is_not(jail_env, tmp_path):
    """perf_event_open is kernel surface no agent needs: the strict modes' filter answers EPERM
    before the kernel looks at it; compatibility's filter leaves it to the kernel (which faults on
    the missing attributes)."""
    import errno

    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["argv"][-1] = _perf_probe(spec["machine"])
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 0 and f"RAN perf -1 {errno.EPERM}" in proc.stdout, (proc.stdout, proc.stderr)
    compat = _compat_spec(env, tmp_path)
    compat["argv"][-1] = _perf_probe(compat["machine"])
    proc = _launch(env, compat, compat["fingerprint"], tmp_path)
    assert proc.returncode == 0 and "RAN perf -1" in proc.stdout, (proc.stdout, proc.stderr)
    assert f"RAN perf -1 {errno.EPERM}\n" not in proc.stdout


def test_a_jail_share_is_written_without_a_pty_share_too(jail_env, tmp_path):
    """A policy with per-user count shares and no pty share (-1) still enters its own namespace
    and writes them: a value the kernel refuses there stops the launch (the share is applied)."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    if not (spec["policy"].get("limits") or {}).get("user"):
        pytest.skip("this host gives the jail no share of its per-user counts")

    def edit(policy):
        policy["limits"]["user"] = [["max_user_namespaces", 2**40]]
        policy["limits"].pop("ptys", None)
    _change(env, spec, edit)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 5 and "cannot give the jail its own user namespace" in proc.stderr, (proc.returncode, proc.stderr)
    assert "(limits: Invalid argument)" in proc.stderr, proc.stderr  # what failed: a value, not a step
    assert "RAN" not in proc.stdout


def test_a_pty_share_alone_still_gets_the_jails_own_devpts(jail_env, tmp_path):
    """A policy with a pty share and no per-user count shares: the jail's /dev/pts is the
    launcher's own devpts, with max= that share."""
    env = jail_env
    _, spec = _spec(env, tmp_path)

    def edit(policy):
        policy["limits"]["user"] = []
        policy["limits"]["ptys"] = 0  # a share of none (0 is a share: no new pty in the jail)
    _change(env, spec, edit)
    spec["argv"][-1] = "grep ' /dev/pts ' /proc/self/mounts; echo RAN"
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 0 and "RAN" in proc.stdout, (proc.returncode, proc.stderr)
    assert "max=0" in proc.stdout, proc.stdout
    # ... mounted nosuid and noexec, as every other writable mount of the jail
    options = next(ln for ln in proc.stdout.splitlines() if " /dev/pts " in ln).split()[3].split(",")
    assert "nosuid" in options and "noexec" in options, options


def test_a_root_run_jails_proxy_counts_in_its_pids_group(jail_env, tmp_path):
    """The root-run launch's helper, serving the proxy, joins the jail's pids group (the proxy's
    threads count toward pids.max, uid 0 has no RLIMIT_NPROC): a process other than the launcher
    (which became bwrap) runs tmuxjail.pane.launch in that group while the jail runs."""
    from conftest import wait_until

    from tmuxjail.sandbox import pids

    if os.getuid() != 0:
        pytest.skip("only a root-run launcher joins a pids cgroup (a user's jail has RLIMIT_NPROC)")
    found = pids.hierarchy()
    if found is None:
        pytest.skip("no pids cgroup controller on this host")
    env = jail_env
    _, spec = _spec(env, tmp_path)
    assert spec["policy"].get("network") == "proxy" and spec["policy"]["limits"].get("nproc")
    done = env.ws / ".kl-done"  # the workspace: the jail sees it
    spec["argv"][-1] = f"while ! test -e {done}; do sleep 0.1; done; echo RAN"
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o600)
    launcher = subprocess.Popen([sys.executable, "-E", "-P", "-m", "tmuxjail.pane.launch", "--fp", spec["fingerprint"],
                                 str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env.environ())
    sid = "".join(c for c in spec["session_id"] if c.isalnum() or c in "-_")[:64]
    own = Path(found[0], pids.GROUP, f"{sid}-{launcher.pid}")

    def proxy_in_group() -> bool:
        try:
            procs = [int(p) for p in (own / "cgroup.procs").read_text().split()]
            return any(p != launcher.pid and b"tmuxjail.pane.launch" in Path(f"/proc/{p}/cmdline").read_bytes()
                       for p in procs)
        except (OSError, ValueError):
            return False
    try:
        joined = wait_until(proxy_in_group, 20)
    finally:
        done.mkdir(exist_ok=True)
        try:
            out, err = launcher.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            launcher.kill()
            raise
    assert launcher.returncode == 0 and "RAN" in out, err
    assert joined, "the root-run proxy's threads are not counted in the jail's pids group"


def test_a_cli_the_stores_digest_cache_vouches_for_is_not_hashed_again(jail_env, tmp_path):
    """The start hashed the CLI and cached its digest under the file's stat identity; the
    launcher asks the store for it and does not read the whole file again (a 100 MB CLI costs
    seconds on every start). Shown with a cached digest that is the policy's but not the file's:
    only a launch that trusted the cache runs it."""
    from tmuxjail.store import Store

    env = jail_env
    _, spec = _spec(env, tmp_path)
    exe = spec["policy"]["executable"]["path"]
    vouched = "sha256:" + "1" * 64
    spec["policy"]["executable"]["sha256"] = vouched
    _restore(env, spec)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 3 and "changed since" in proc.stderr, proc.stderr  # the control: hashed, refused
    s = Store(Path(env.store))
    s.put_digest(exe, tuple(launch_stat_key(exe)), vouched)
    s.close()
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 0 and "RAN" in proc.stdout, (proc.returncode, proc.stderr)


def launch_stat_key(path: str) -> list[int]:
    from tmuxjail.pane.executable import stat_key

    return stat_key(os.stat(path))


@pytest.mark.skipif(not os.access("/usr/bin/strace", os.X_OK), reason="needs strace (scripts/test.sh installs it)")
def test_a_traced_launch_with_a_proxy_ends_when_its_jail_ends(jail_env, tmp_path):
    """A discovery run under the network proxy: strace in front of bubblewrap, the proxy
    listening; the run ends with its jail and leaves its trace. (It does not show whether the
    proxy detaches from strace: with strace 6.1 the run ends either way.)"""
    from tmuxjail.pane.strace import CAP_FILE

    env = jail_env
    _, spec = _spec(env, tmp_path)
    assert spec["policy"].get("network") == "proxy"
    run = Path(env.store).parent / "discover" / "kl-trace"
    run.mkdir(parents=True)
    (run / CAP_FILE).write_text(str(1 << 24))
    spec["trace"] = str(run / "trace")
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 0 and "RAN" in proc.stdout, (proc.returncode, proc.stderr)
    assert (run / "trace").stat().st_size > 0
