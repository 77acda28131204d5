"""store: row ids are uuid4 texts (made without importing uuid on every start), session and event
writes skip the per-commit fsync (WAL, synchronous=NORMAL), and approvals and revocations are
committed with synchronous=FULL, so a power loss cannot undo what a human decided."""

from __future__ import annotations

import re
import uuid

from tmuxjail.store import Store, new_id

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_new_id_is_a_uuid4_text():
    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    for i in ids:
        u = uuid.UUID(i)
        assert UUID4.match(i) and str(u) == i and u.version == 4 and u.variant == uuid.RFC_4122


def _sync(store: Store) -> int:
    return int(store.db.execute("PRAGMA synchronous").fetchone()[0])


def _levels(statements: list[str]) -> list[tuple[str, str]]:
    """Each write with the synchronous level it ran under (NORMAL, as the store opens, or FULL)."""
    level, out = "NORMAL", []
    for sql in statements:
        if sql.startswith("PRAGMA synchronous="):
            level = sql.split("=", 1)[1]
        elif sql.startswith(("INSERT", "UPDATE", "DELETE")):
            out.append((" ".join(sql.split()[:3]), level))
    return out


def test_approvals_and_revocations_commit_with_full_sync(tmp_path):
    store = Store(tmp_path / "store.db")
    assert _sync(store) == 1  # NORMAL
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    store.add_approval("codex", "1", "h", {"path": "/x"}, [], "me")
    assert store.revoke("codex") == 1
    store.insert_session(name="s", provider="codex", mode="isolated", env_name="default", workspace="/w",
                         request="{}", status="starting", tmux_session="s")
    store.db.set_trace_callback(None)
    assert _levels(statements) == [
        ("INSERT INTO approvals", "FULL"), ("INSERT INTO events", "FULL"),
        ("UPDATE approvals SET", "FULL"), ("INSERT INTO events", "FULL"),
        ("INSERT INTO sessions", "NORMAL")]
    assert _sync(store) == 1
