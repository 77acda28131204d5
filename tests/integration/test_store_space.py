"""The store stays small and says whether it is whole (issue 27.3): `prune` drops audits that a
later audit of the same session superseded and VACUUMs the file; `doctor` reports the store's size
and PRAGMA quick_check."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path


def _doctor_store(env) -> dict:
    checks = json.loads(env.run("doctor", "--json").stdout)["checks"]
    return next(c for c in checks if c["check"] == "store")


def test_prune_reclaims_superseded_audits_and_doctor_reports_size_and_integrity(jail_env):
    env = jail_env
    info = env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "j", "--detach")
    (env.ws / ".envrc").write_text("export A=1\n")
    assert env.run("audit", "j").returncode == 6
    db = sqlite3.connect(env.store, isolation_level=None)
    blob = json.dumps({"count": 1, "findings": [{"kind": "direnv", "path": "x", "detail": "y" * 900_000}]})
    for _ in range(20):  # superseded audits, as older versions stored them (51 MB each in issue 27)
        db.execute("INSERT INTO events (session_id, at, kind, data) VALUES (?, '2020-01-01T00:00:00Z', 'audit', ?)",
                   (info["id"], blob))
    db.execute("INSERT INTO events (session_id, at, kind, data) VALUES (?, '2020-01-01T00:00:00Z', 'audit', ?)",
               (info["id"], json.dumps({"count": 1, "findings": [], "complete": True})))
    db.close()
    big = _doctor_store(env)
    assert big["ok"] and "quick_check ok" in big["detail"] and "MiB" in big["detail"], big
    done = env.json("prune")
    space = done["store"]
    assert space["events_dropped"] >= 20 and space["bytes_after"] < space["bytes_before"] // 4, space
    kinds = [r[0] for r in sqlite3.connect(env.store).execute(
        "SELECT kind FROM events WHERE session_id=? AND kind='audit'", (info["id"],))]
    assert kinds == ["audit"]  # the newest: what list and show read
    assert env.json("list")[0]["audit"] == 1
    assert "store:" in env.run("prune").stdout


def test_doctor_says_when_the_store_is_damaged(jail_env):
    env = jail_env
    env.json("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "j", "--detach")
    env.run("stop", "j", check=True)
    data = bytearray(env.store.read_bytes())
    page = 4096
    for i in range(page + 100, min(len(data), 3 * page), 7):  # scribble over the second page on
        data[i] = 0xA5
    env.store.write_bytes(bytes(data))
    store = _doctor_store(env)
    assert not store["ok"] and store["fix"], store
    assert env.run("doctor").returncode != 0


def test_doctor_names_the_per_user_counts_no_jail_share_holds(jail_env):
    """epoll watches are counted per user in every namespace (docs/resources.md): doctor says so,
    with this host's limit, rather than letting the jail share read as covering everything."""
    checks = json.loads(jail_env.run("doctor", "--json").stdout)["checks"]
    row = next(c for c in checks if c["check"] == "not shared out")
    limit = Path("/proc/sys/fs/epoll/max_user_watches").read_text().strip()
    assert f"epoll watches ({limit} per user" in row["detail"], row
