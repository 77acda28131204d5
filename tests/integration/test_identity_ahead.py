"""A start hashes a new executable ahead (tmuxjail/ahead.py, in a thread while the start code
loads), and the policy still names the executable by the digest of what is there: a changed CLI
is never named by its old digest, and a cached one is not hashed again."""

from __future__ import annotations

import hashlib

import pytest

pytestmark = pytest.mark.integration


def _sha(path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_changed_executable_is_named_by_its_new_digest(jail_env):
    env = jail_env
    exe = env.bin / "codex"

    def named() -> str:
        out = env.json("start", "codex", "--mode", "isolated", "--workspace", str(env.ws), "--dry-run")
        return out["policy"]["executable"]["sha256"]

    assert named() == _sha(exe)
    assert named() == _sha(exe)  # from the digest cache
    with open(exe, "a") as f:
        f.write("# a new version\n")
    assert named() == _sha(exe)
