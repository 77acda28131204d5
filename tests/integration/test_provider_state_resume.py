"""A verified session recorded before the provider-state guards (docs/provider-state.md) has
another fingerprint today: its resume is refused with the reason `provider-state` and what to do,
not a crash."""

from __future__ import annotations

import json
import sqlite3

from tmuxjail.canon import fingerprint


def test_an_older_verified_session_is_refused_with_a_clear_reason(jail_env):
    env = jail_env
    env.run("approve", "codex", "--yes", check=True)
    env.run("start", "codex", "--mode", "verified", "--workspace", str(env.ws), "--name", "v", "--detach", check=True)
    env.run("stop", "v", check=True)
    db = sqlite3.connect(env.store)
    sid, raw = db.execute("SELECT id, policy FROM sessions WHERE name='v'").fetchone()
    old = json.loads(raw)
    assert old["state_guards"] and "state_copies" not in old  # (Codex has no private copy)
    del old["state_guards"]  # as a session started before it was recorded
    db.execute("UPDATE sessions SET policy=?, fingerprint=? WHERE id=?",
               (json.dumps(old, sort_keys=True), fingerprint(old), sid))
    db.commit()
    db.close()
    proc = env.run("resume", "v", "--detach")
    assert proc.returncode == 3, proc.stderr
    assert "(provider-state); refusing to resume" in proc.stderr
    assert "--accept-changes" in proc.stderr and "Traceback" not in proc.stderr
