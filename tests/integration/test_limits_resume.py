"""A jail's share of the user's per-user limits is part of its policy (docs/resources.md): a
session recorded before jails had one, or whose user's limits changed since, is refused on
resume with reason `limits` and a hint that says why and what to do."""

from __future__ import annotations

import json
import resource
import sqlite3

import pytest

from tmuxjail import canon

pytestmark = pytest.mark.integration


def _start(env) -> dict:
    return env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", "app", "--detach")


def test_a_session_from_before_the_share_is_refused_clearly(jail_env):
    env = jail_env
    _start(env)
    env.report()
    env.kill()
    db = sqlite3.connect(env.store)
    policy = json.loads(db.execute("SELECT policy FROM sessions").fetchone()[0])
    # What a policy held before issue 27: sizes and a flat process count, no share.
    policy["limits"] = {"tmp_bytes": 1 << 30, "run_bytes": 64 << 20, "home_bytes": 1 << 30, "nproc": 4096,
                        "memory": "none"}
    with db:
        db.execute("UPDATE sessions SET policy=?, fingerprint=?", (json.dumps(policy), canon.fingerprint(policy)))
    db.close()
    proc = env.run("resume", "app", "--detach", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["limits"], proc
    assert "docs/resources.md" in proc.stderr and "--accept-changes" in proc.stderr and "Traceback" not in proc.stderr


def test_a_changed_user_limit_changes_the_policy(jail_env):
    env = jail_env
    first = _start(env)["fingerprint"]
    env.report()
    env.kill()
    soft, hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)
    if soft == resource.RLIM_INFINITY or soft < 8:
        pytest.skip("RLIMIT_SIGPENDING is unlimited (or tiny) here")
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (soft // 2, hard))  # the jail's share follows the user's own
    try:
        proc = env.run("resume", "app", "--detach", "--json")
    finally:
        resource.setrlimit(resource.RLIMIT_SIGPENDING, (soft, hard))
    assert proc.returncode == 3 and json.loads(proc.stdout)["reasons"] == ["limits"], proc
    assert env.json("show", "app")["fingerprint"] == first
