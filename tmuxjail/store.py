"""SQLite: the durable truth about sessions, plus the identity cache and an event log.
The only module that opens SQLite. Stdlib only, so `list` and the launcher start fast."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ResumeRefused, TmuxjailError, UsageError
from .record import Record
from .request import StartRequest

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    provider TEXT NOT NULL,
    mode TEXT NOT NULL,
    env_name TEXT NOT NULL,
    workspace TEXT NOT NULL,
    fingerprint TEXT,
    policy TEXT,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    failure TEXT,
    native_id TEXT,
    private_home TEXT,
    tmux_socket TEXT,
    tmux_session TEXT,
    tmux_pane TEXT,
    approval_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS sessions_live_name ON sessions(name) WHERE status != 'stopped';
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    profile_version TEXT NOT NULL,
    profile_hash TEXT NOT NULL,
    executable TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    approved_at TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS identity_cache (
    path TEXT PRIMARY KEY,
    stat_key TEXT NOT NULL,
    digest TEXT NOT NULL
);
"""

TABLES = frozenset({"sessions", "events", "approvals", "identity_cache"})
FIX = "tmuxjail doctor --move-store-aside"


def damaged(path: Path, exc: Exception) -> TmuxjailError:
    """The one error every command gives for a store it cannot use; nothing was changed."""
    return TmuxjailError(
        f"the store {path} is damaged: {exc}",
        hint=f"`{FIX}` renames it to {path.name}.broken-TIME (kept) and copies what still reads into a new one")


def move_aside(path: Path) -> dict:
    """Rename a damaged store (and its WAL files) to NAME.broken-TIME, make a new store, and copy
    every row that still reads into it. Only on an explicit command: nothing is deleted."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.broken-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{path}{suffix}")
        if src.exists():
            os.replace(src, f"{aside}{suffix}")
    new = Store(path)
    kept: dict[str, int] = {}
    try:
        old = sqlite3.connect(f"file:{aside}?mode=ro", uri=True)
        for table in sorted(TABLES):
            kept[table] = 0
            try:
                cur = old.execute(f"SELECT * FROM {table}")
                names = [d[0] for d in cur.description]
                have = {r[1] for r in new.db.execute(f"PRAGMA table_info({table})")}
                cols = [c for c in names if c in have]
                for r in cur:
                    row = dict(zip(names, r, strict=True))
                    try:
                        new.db.execute(f"INSERT OR IGNORE INTO {table} ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                                       [row[c] for c in cols])
                        kept[table] += 1
                    except sqlite3.DatabaseError:
                        pass
            except sqlite3.DatabaseError:
                pass  # this table does not read: what it held stays in the renamed file
        old.close()
    except sqlite3.DatabaseError:
        pass
    new.close()
    return {"moved_to": str(aside), "kept": kept}


def new_id() -> str:
    """str(uuid.uuid4()), without importing uuid (and platform, ctypes' loader...) on every start."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class SessionRow(Record):
    """One row of the sessions table, in its column order (NULL columns may be None)."""

    id: str
    name: str
    provider: str
    mode: str
    env_name: str
    workspace: str
    fingerprint: str | None
    policy: str | None
    request: str
    status: str
    failure: str | None
    native_id: str | None
    private_home: str | None
    tmux_socket: str | None
    tmux_session: str  # set when the row is made (NULL only in the schema)
    tmux_pane: str | None
    approval_id: str | None
    created_at: str
    updated_at: str

    @property
    def policy_data(self) -> dict[str, Any] | None:
        return json.loads(self.policy) if self.policy else None

    @property
    def request_data(self) -> dict[str, Any]:
        """The request column as stored (`show` prints it as it is); readers take start_request."""
        data: dict[str, Any] = json.loads(self.request)
        return data

    @property
    def start_request(self) -> StartRequest:
        """The request this session started from (its mode: the resolved one); a row whose request
        cannot be read is refused, as a tampered one."""
        try:
            return StartRequest.from_json(self.request)
        except ValueError as exc:
            raise ResumeRefused(f"{self.name}: its stored request cannot be read ({exc})",
                                hint=f"inspect with `tmuxjail show {self.name}`, then start a new session",
                                data={"name": self.name, "reasons": ["tampered"]}) from None


COLUMNS = SessionRow._fields


class Store:
    def __init__(self, path: Path, *, readonly: bool = False):
        self.path = path
        try:
            if readonly:
                if not path.exists():
                    self.db = sqlite3.connect(":memory:")
                    self.db.executescript(SCHEMA)
                else:
                    self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
            else:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
                os.close(fd)
                self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
                self.db.execute("PRAGMA journal_mode=WAL")
                # No fsync per commit (~1-3 ms each, several per start): sessions and events are
                # about tmux sessions that a power loss ends too, and the digest cache is a cache.
                # WAL stays consistent; approvals and revocations commit with FULL (_durable).
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.execute("PRAGMA busy_timeout=30000")
                self.db.executescript(SCHEMA)
                have = {r[1] for r in self.db.execute("PRAGMA table_info(sessions)")}
                for col in set(COLUMNS) - have:  # a store made by an older version
                    self.db.execute(f"ALTER TABLE sessions ADD COLUMN {col} TEXT")
            missing = TABLES - {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if missing and (not readonly or path.exists()):
                raise sqlite3.DatabaseError(f"not tmuxjail's store (no table {min(missing)})")
        except sqlite3.DatabaseError as exc:
            raise damaged(path, exc) from None
        self.db.row_factory = sqlite3.Row
        # A connection and its statement cache refer to each other: dropped, it waits for the cycle
        # collector, and a CLI that leaves without the interpreter's teardown (cli.leave) never
        # closes it, leaving its writes in the WAL. So it closes with its store, or at exit
        # (atexit runs there): the last connection folds the WAL into the store file, as before.
        weakref.finalize(self, self.db.close)

    def close(self) -> None:
        self.db.close()

    # sessions -----------------------------------------------------------------------------
    def insert_session(self, **fields: Any) -> SessionRow:
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update(fields)
        row["id"] = row["id"] or new_id()
        row["created_at"] = row["updated_at"] = now()
        try:
            self.db.execute(
                f"INSERT INTO sessions ({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
                [row[c] for c in COLUMNS],
            )
        except sqlite3.IntegrityError:
            raise UsageError(f"a session named {row['name']!r} already exists",
                             hint="pick another --name, or stop the old one") from None
        return SessionRow(**row)

    def update_session(self, sid: str, **fields) -> None:
        fields["updated_at"] = now()
        sets = ",".join(f"{k}=?" for k in fields)
        self.db.execute(f"UPDATE sessions SET {sets} WHERE id=?", [*fields.values(), sid])

    def sessions(self, include_stopped: bool = False) -> list[SessionRow]:
        q = f"SELECT {','.join(COLUMNS)} FROM sessions"
        if not include_stopped:
            q += " WHERE status != 'stopped'"
        return [SessionRow._make(r) for r in self.db.execute(q + " ORDER BY created_at, name")]

    def delete_session(self, sid: str, updated_at: str) -> bool:
        """Delete a session row only if nobody changed it since it was read (prune)."""
        cur = self.db.execute("DELETE FROM sessions WHERE id=? AND updated_at=?", (sid, updated_at))
        return cur.rowcount == 1

    def forget_session(self, sid: str) -> None:
        """A start that never happened: its row and its events, in one transaction."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("DELETE FROM events WHERE session_id=?", (sid,))
            self.db.execute("DELETE FROM sessions WHERE id=?", (sid,))

    def find(self, name: str) -> SessionRow | None:
        """The live session of that name (or id, as tmux key bindings pass it), else the most
        recent stopped one."""
        r = self.db.execute(
            "SELECT * FROM sessions WHERE name=? OR id=? ORDER BY (status='stopped'), created_at DESC LIMIT 1",
            (name, name),
        ).fetchone()
        return SessionRow(**dict(r)) if r else None

    def names(self, include_stopped: bool = False) -> set[str]:
        where = "" if include_stopped else " WHERE status != 'stopped'"
        return {r[0] for r in self.db.execute("SELECT name FROM sessions" + where)}

    # events -------------------------------------------------------------------------------
    def event(self, kind: str, session_id: str | None = None, **data) -> None:
        self.db.execute(
            "INSERT INTO events (session_id, at, kind, data) VALUES (?,?,?,?)",
            (session_id, now(), kind, json.dumps(data, sort_keys=True)),
        )

    # space -------------------------------------------------------------------------------------
    def size(self) -> int:
        """Bytes on disk: the database and its WAL files."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.stat(f"{self.path}{suffix}").st_size
            except OSError:
                pass
        return total

    def reclaim(self) -> dict:
        """`prune`: drop what no command reads any more (audits superseded by a later one of the
        same session, audit snapshots of sessions that are gone), then VACUUM and truncate the WAL
        so the file shrinks. Returns the sizes before and after, and the events dropped."""
        before = self.size()
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            cur = self.db.execute(
                "DELETE FROM events WHERE kind='audit' AND id NOT IN "
                "(SELECT max(id) FROM events WHERE kind='audit' GROUP BY session_id)")
            dropped = cur.rowcount
            cur = self.db.execute(
                "DELETE FROM events WHERE kind IN ('audit', 'audit-base') AND session_id IS NOT NULL "
                "AND session_id NOT IN (SELECT id FROM sessions)")
            dropped += cur.rowcount
        try:
            self.db.execute("VACUUM")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.OperationalError as exc:  # another tmuxjail holds it: the next prune will
            return {"bytes_before": before, "bytes_after": self.size(), "events_dropped": dropped,
                    "not_reclaimed": str(exc)}
        return {"bytes_before": before, "bytes_after": self.size(), "events_dropped": dropped}

    def events(self, session_id: str | None = None) -> list[dict]:
        q, args = "SELECT * FROM events", []
        if session_id:
            q, args = q + " WHERE session_id=?", [session_id]
        return [dict(r) for r in self.db.execute(q + " ORDER BY id", args)]

    # identity cache (identity.DigestCache) ----------------------------------------------------
    def get_digest(self, path: str, key: tuple[int, ...]) -> str | None:
        r = self.db.execute("SELECT stat_key, digest FROM identity_cache WHERE path=?", (path,)).fetchone()
        return r["digest"] if r and r["stat_key"] == json.dumps(list(key)) else None

    def put_digest(self, path: str, key: tuple[int, ...], digest: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO identity_cache (path, stat_key, digest) VALUES (?,?,?)",
            (path, json.dumps(list(key)), digest),
        )

    # approvals ----------------------------------------------------------------------------
    def add_approval(self, provider: str, profile_version: str, profile_hash: str, executable: dict,
                     capabilities, user: str) -> dict:
        row = {"id": new_id(), "provider": provider, "profile_version": profile_version,
               "profile_hash": profile_hash, "executable": executable,
               "capabilities": sorted(capabilities), "approved_at": now(), "approved_by": user,
               "revoked_at": None}
        with self._durable():
            self.db.execute(
                "INSERT INTO approvals (id, provider, profile_version, profile_hash, executable, capabilities,"
                " approved_at, approved_by) VALUES (?,?,?,?,?,?,?,?)",
                (row["id"], provider, profile_version, profile_hash, json.dumps(executable, sort_keys=True),
                 json.dumps(row["capabilities"]), row["approved_at"], user),
            )
            self.event("approve", None, approval=row["id"], provider=provider, capabilities=row["capabilities"])
        return row

    @contextmanager
    def _durable(self) -> Iterator[None]:
        """Commits inside are on disk when they return (synchronous=FULL): what a human approved
        or revoked must not come back different after a power loss."""
        self.db.execute("PRAGMA synchronous=FULL")
        try:
            yield
        finally:
            self.db.execute("PRAGMA synchronous=NORMAL")

    def approvals(self, provider: str | None = None, include_revoked: bool = False) -> list[dict]:
        q, args = "SELECT * FROM approvals WHERE 1=1", []
        if provider:
            q, args = q + " AND provider=?", [provider]
        if not include_revoked:
            q += " AND revoked_at IS NULL"
        out = []
        for r in self.db.execute(q + " ORDER BY approved_at, rowid", args):
            d = dict(r)
            d["executable"] = json.loads(d["executable"])
            d["capabilities"] = json.loads(d["capabilities"])
            out.append(d)
        return out

    def revoke(self, provider: str) -> int:
        with self._durable():
            cur = self.db.execute("UPDATE approvals SET revoked_at=? WHERE provider=? AND revoked_at IS NULL",
                                  (now(), provider))
            if cur.rowcount:
                self.event("revoke", None, provider=provider, count=cur.rowcount)
        return cur.rowcount
