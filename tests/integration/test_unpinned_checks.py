"""Checks no registered guard pinned until a mutation run showed them removable (issue 29),
attacked through the CLI, the in-pane launcher and the warm start as they run. (Unit level:
tests/unit/test_mutation_kills.py; from inside a jail: tests/adversarial/test_unpinned_attacks.py.)"""

from __future__ import annotations

import pytest
from conftest import have_jail
from test_launcher import _launch, _spec
from test_netpolicy_flow import start, write_config
from test_warm_cache import BASE, World, same

from tmuxjail import plan

pytestmark = pytest.mark.integration


def test_a_spec_naming_another_program_as_bubblewrap_is_refused(jail_env, tmp_path):
    """Whoever could rewrite a launch spec names their own program as bubblewrap (it then runs
    outside every jail); the call around it is what the policy builds, so only the path check
    stands in the way."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    ran = tmp_path / "ran"
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\ntouch {ran}\nexec {spec['call']['bwrap']} \"$@\"\n")
    fake.chmod(0o755)
    spec["call"]["bwrap"] = str(fake)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 3 and "bubblewrap path" in proc.stderr, (proc.returncode, proc.stderr)
    assert "RAN" not in proc.stdout and not ran.exists()


@pytest.mark.parametrize("wide", ["*", "*.com"])
def test_a_wildcard_domain_in_verified_mode_needs_its_own_approval(jail_env, wide):
    """An approved profile does not stretch to `--allow-domain '*'`: that would reach any host."""
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    proc = start(env, "codex", "verified", "--network", "proxy", "--allow-domain", wide, name="w")
    assert proc.returncode == 4 and f"(domain:{wide})" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr)
    assert env.tmux("ls", check=False) == ""


def test_a_quoted_false_refuses_the_config(jail_env):
    """`allow_unguarded_compatibility = "false"` is a string, not false: read as true it runs
    compatibility without bubblewrap wherever bubblewrap is missing. The config is refused."""
    env = jail_env
    write_config(env, 'allow_unguarded_compatibility = "false"\n')
    proc = env.run("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws), "--name", "u", "--detach")
    assert proc.returncode == 2 and "allow_unguarded_compatibility" in proc.stderr, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and env.tmux("ls", check=False) == ""


def test_a_cli_swapped_while_its_policy_resolves_is_not_remembered(tmp_path, monkeypatch):
    """The CLI is replaced after the full resolution hashed it and before the warm cache records
    its stat identity: the entry would pair the new file with the old digest, and every later
    start would take the old policy for the new binary. Nothing is remembered; the next start
    resolves (and hashes) the new one."""
    if (why := have_jail()) is not None:
        pytest.skip(why)
    w = World(tmp_path, monkeypatch)
    cli = w.pkg / "bin" / "pi-cli"
    real = plan.resolve

    def racing(*a, **k):
        p = real(*a, **k)
        cli.write_text(cli.read_text() + "# swapped after hashing\n")
        return p
    monkeypatch.setattr(plan, "resolve", racing)
    first = w.warm(BASE)
    monkeypatch.setattr(plan, "resolve", real)
    got = w.warm(BASE)
    same(got, w.full(BASE))
    assert got.fingerprint != first.fingerprint


def test_the_status_file_is_made_afresh_for_each_launch(jail_env, tmp_path):
    """bubblewrap's exit status goes to the spec's status file, created or truncated: a stale
    longer one must not leave its tail behind (the session's end would read another jail's)."""
    import json

    env = jail_env
    _, spec = _spec(env, tmp_path)
    status = tmp_path / "spec.status"
    for stale in (None, '{"exit-code": 99}\n' + "x" * 4096):
        if stale is None:
            status.unlink(missing_ok=True)
        else:
            status.write_text(stale)
        proc = _launch(env, spec, spec["fingerprint"], tmp_path)
        assert proc.returncode == 0 and "RAN" in proc.stdout, proc.stderr
        rows = [json.loads(line) for line in status.read_text().splitlines()]
        assert rows and rows[-1].get("exit-code") == 0 and all("exit-code" in r or "child-pid" in r for r in rows), rows


def test_a_root_run_jail_is_held_by_its_own_pids_group(jail_env, tmp_path):
    """uid 0 ignores RLIMIT_NPROC: the launcher of a root-run jail joins a pids cgroup of its own
    whose pids.max is the policy's nproc, and the jail's processes count in it (the fork bomb
    itself: tests/adversarial/test_kernel.py); its helper sweeps the groups of finished jails."""
    import json
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from conftest import wait_until

    from tmuxjail.sandbox import pids

    if os.getuid() != 0:
        pytest.skip("only a root-run launcher joins a pids cgroup (a user's jail has RLIMIT_NPROC)")
    found = pids.hierarchy()
    if found is None:
        pytest.skip("no pids cgroup controller on this host")
    env = jail_env
    _, spec = _spec(env, tmp_path)
    # A finished jail's group left empty long ago: the launch's helper sweeps it away.
    stale = Path(found[0], pids.GROUP, "finished-jail-1")
    stale.mkdir(parents=True)
    os.utime(stale, (time.time() - pids.STALE_SECONDS - 60,) * 2)
    spec["argv"][-1] = "for i in $(seq 30); do sleep 3 & done; wait; echo RAN"  # 30 processes at once, in the jail
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o600)
    launcher = subprocess.Popen([sys.executable, "-E", "-P", "-m", "tmuxjail.pane.launch", "--fp", spec["fingerprint"],
                                 str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env.environ())
    sid = "".join(c for c in spec["session_id"] if c.isalnum() or c in "-_")[:64]
    own = Path(found[0], pids.GROUP, f"{sid}-{launcher.pid}")  # this launch's (the pane's has its own)

    def proxy_in_group() -> bool:  # the launcher's helper serving the proxy (the launcher is bwrap now)
        try:
            procs = (own / "cgroup.procs").read_text().split()
            return any(b"tmuxjail.pane.launch" in Path(f"/proc/{p}/cmdline").read_bytes() for p in procs)
        except OSError:
            return False
    proxied = spec["policy"].get("network") == "proxy"
    joined = wait_until(proxy_in_group, 10) if proxied else None
    out, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 0 and "RAN" in out, err
    assert joined in (True, None), "the root-run proxy's threads are not counted in the jail's pids group"
    assert own.is_dir(), "this launch joined no pids group of its own"
    assert (own / "pids.max").read_text().strip() == str(spec["policy"]["limits"]["nproc"])
    # The jail's processes were in it, not only the proxy's threads (which join the same group).
    assert int((own / "pids.peak").read_text()) >= 30
    assert wait_until(lambda: not stale.exists(), 10), "the finished jail's group was not swept"



@pytest.mark.parametrize("body", [b"{not json", b"[" * 100_000, b'"a string"'])
def test_a_spec_that_is_no_json_object_is_refused_in_one_line(jail_env, tmp_path, body):
    env = jail_env
    path = tmp_path / "bad.json"
    path.write_bytes(body)
    path.chmod(0o600)
    proc = _launch(env, {}, "sha256:" + "0" * 64, tmp_path, path=path)
    assert proc.returncode == 3 and "launch spec is not" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not path.exists()  # read once, then gone


def test_a_spec_passing_tmux_variables_into_a_compatibility_jail_is_refused(jail_env, tmp_path):
    """Compatibility jails inherit the environment, but never tmux's: TMUX and TMUX_PANE would
    point the jail at the server's socket. A spec that adds them is refused as tampered."""
    import json
    import platform
    import sqlite3

    env = jail_env
    args = ("start", "shell", "--mode", "compatibility", "--workspace", str(env.ws))
    dry = env.json(*args, "--dry-run")
    env.json(*args, "--name", "c", "--detach")
    row = sqlite3.connect(env.store).execute("SELECT id, policy, fingerprint FROM sessions").fetchone()
    spec = {"session_id": row[0], "fingerprint": row[2], "policy": json.loads(row[1]),
            "argv": [*dry["cli_argv"], "-c", "echo RAN"], "call": dry["sandbox_call"], "env": dict(dry["policy"]["env_set"]),
            "store": str(env.store), "status_file": str(tmp_path / "spec.status"), "machine": platform.machine(),
            "sandboxed": True, "landlock_scope": True, "layout": dry["host_layout"]}
    for extra, ok in (({}, True), ({"TMUX": "/tmp/tmux-0/default,1,0"}, False), ({"TMUX_PANE": "%1"}, False)):
        proc = _launch(env, dict(spec, env={**spec["env"], **extra}), spec["fingerprint"], tmp_path)
        if ok:
            assert proc.returncode == 0 and "RAN" in proc.stdout, proc.stderr
        else:
            assert proc.returncode == 3 and "environment" in proc.stderr and "RAN" not in proc.stdout, proc.stderr


def test_a_spec_whose_host_layout_is_malformed_is_refused_not_crashed(jail_env, tmp_path):
    """A rewritten spec whose host layout has a field the launcher does not know is a refusal
    that names it (exit 3), never a traceback out of the launcher."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    spec["layout"]["not_a_field"] = "x"
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 3 and "host layout" in proc.stderr, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr


def _restore(env, spec):
    """The store holds this spec's policy as the session's own (what a start would have written)."""
    import json
    import sqlite3

    from tmuxjail.canon import fingerprint

    spec["fingerprint"] = fingerprint(spec["policy"])
    with sqlite3.connect(env.store) as db:
        db.execute("UPDATE sessions SET policy = ?, fingerprint = ? WHERE id = ?",
                   (json.dumps(spec["policy"]), spec["fingerprint"], spec["session_id"]))


def test_a_store_that_is_no_database_is_a_one_line_refusal(jail_env, tmp_path):
    """The launcher's helper reads the store: a file there that is no SQLite database (a disk
    error, a store replaced) refuses the launch with the store's answer, not a traceback in the pane."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    bad = tmp_path / "not-a-store.db"
    bad.write_bytes(b"not a database\n" * 512)
    spec["store"] = str(bad)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 3 and "does not hold this fingerprint" in proc.stderr, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "RAN" not in proc.stdout


def test_a_jail_share_the_kernel_refuses_is_a_one_line_refusal(jail_env, tmp_path):
    """The jail's share of a per-user count is written in its own user namespace before bwrap
    runs; a value the kernel refuses there (above INT_MAX) stops the launch with the reason and
    the way out, not a traceback, and nothing runs."""
    env = jail_env
    _, spec = _spec(env, tmp_path)
    if not (spec["policy"].get("limits") or {}).get("user"):
        pytest.skip("this host gives the jail no share of its per-user counts")
    spec["policy"]["limits"]["user"] = [["max_user_namespaces", 2**40]]
    _restore(env, spec)
    proc = _launch(env, spec, spec["fingerprint"], tmp_path)
    assert proc.returncode == 5 and "cannot give the jail its own user namespace" in proc.stderr, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "RAN" not in proc.stdout
