"""A start whose executable changed since its policy was cached (a new CLI version) hashes it
ahead (warm.lookup -> identity.hash_ahead, in a thread while the full resolution loads), and the
policy still names the executable by the digest of what is there: a changed CLI is never named by
its old digest."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

pytestmark = pytest.mark.integration


def _sha(path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_changed_executable_is_named_by_its_new_digest(jail_env):
    env = jail_env
    exe = env.bin / "codex"

    def started(name: str) -> str:
        env.run("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--name", name, "--detach",
                check=True)
        db = sqlite3.connect(f"file:{env.store}?mode=ro", uri=True)
        policy = db.execute("SELECT policy FROM sessions WHERE name=?", (name,)).fetchone()[0]
        db.close()
        return json.loads(policy)["executable"]["sha256"]

    assert started("a") == _sha(exe)
    assert started("b") == _sha(exe)  # a warm start: the cached policy
    with open(exe, "a") as f:  # a new version: the warm start misses, and hashes it ahead
        f.write("# a new version\n")
    assert started("c") == _sha(exe)
