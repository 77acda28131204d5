"""What the egress proxy records (issue 27.3): a decision log that keeps its newest rows, and
per-destination counters no flood can push out. Stdlib only: the proxy (netproxy) writes them;
`show --network`, `list` and discovery read them (netlog).

In the session's directory (netlisten.session_dir: tmuxjail's state, which no jail sees):
- network.jsonl and network.jsonl.1: one JSON row per decision (FIELDS; aggregated rows and
  markers add `count`). When the current file reaches ROTATE_AT bytes it becomes .1 (the previous
  .1 is dropped) and the new file begins with a `rotated` row whose count is every row dropped so
  far. At most about 2 x ROTATE_AT bytes on disk, and the newest rows are always there.
- counters-PID.json, one per proxy (each pane has its own): line 1 the totals, line 2 the table
  per destination. Rewritten whole (write, rename) at most every FLUSH_EVERY seconds and on exit.
  A destination the jail has been allowed to reach has its own entry for the proxy's life (the
  allowlist bounds them; MAX_ALLOWED besides); denied names, which the jail chooses freely, get
  entries up to MAX_DENIED, then count under their rule in `other`. Totals are exact either way.
- Requests that fail to parse and connections refused for want of a slot are counted, and one
  aggregated row per kind and cause is written per FLUSH_EVERY (never one row per attempt)."""

from __future__ import annotations

import json
import os
import threading
import time

LOG_NAME = "network.jsonl"
OLD_SUFFIX = ".1"
COUNTERS_PREFIX = "counters-"
ROTATE_AT = 2 << 20
FLUSH_EVERY = 1.0
MAX_ALLOWED = 1024
MAX_DENIED = 1024
MAX_PORTS = 8
FIELDS = {"time": str, "host": str, "port": int, "address": str, "decision": str, "rule": str}
DECISIONS = ("allowed", "denied", "failed")  # a connection's; the others are aggregates and markers
AGGREGATES = ("malformed", "no-slot")
MARKERS = ("rotated", "dropped")
_OPEN = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def row(host: str, port: int, address: str, decision: str, rule: str, count: int | None = None) -> bytes:
    r: dict = {"time": now(), "host": host, "port": port, "address": address, "decision": decision, "rule": rule}
    if count is not None:
        r["count"] = count
    return (json.dumps(r, ensure_ascii=True) + "\n").encode()


def replace_file(path: str, data: bytes) -> None:
    """path's content replaced by data (0600, written aside and renamed in, never through a
    link); a counters file that cannot be written is left as it was (the next save tries again)."""
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        pass


class Recorder:
    """The proxy's log and counters. Thread-safe; every write failure is counted, never raised."""

    def __init__(self, directory: str | None, owner: int | None = None):
        self.dir = directory
        self.path = os.path.join(directory, LOG_NAME) if directory else ""
        self.counters_path = os.path.join(directory, f"{COUNTERS_PREFIX}{owner or os.getpid()}.json") if directory else ""
        self.lock = threading.Lock()
        self.fd: int | None = None
        self.unwritten = 0  # rows lost to a failed write, told by a `dropped` row at the next one
        self.dests: dict[str, dict] = {}
        self.n_allowed = self.n_denied = 0  # entries created by each kind of decision
        self.other: dict[str, int] = {}  # denied beyond MAX_DENIED (and allowed beyond MAX_ALLOWED), by rule
        self.totals: dict[str, int] = dict.fromkeys(("allowed", "denied", "failed", "malformed", "no-slot", "bytes"), 0)
        self.pending: dict[tuple[str, str], int] = {}  # aggregated rows not written yet
        self.dirty = False

    # -- the log -----------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        """Append one row (the lock is held); rotate first when the file is full."""
        if not self.path:
            return
        try:
            if self.fd is None:
                self.fd = os.open(self.path, _OPEN, 0o600)
            if os.fstat(self.fd).st_size >= ROTATE_AT:
                self._rotate()
            if self.unwritten:
                os.write(self.fd, row("", 0, "", "dropped", "write-failed", self.unwritten))
                self.unwritten = 0
            os.write(self.fd, data)
        except OSError:
            self.unwritten += 1

    def _rotate(self) -> None:
        """The full file becomes .1 (the old .1 goes), under a lock on the directory that every
        proxy of the session takes: one of them rotates, the others reopen the new file."""
        import fcntl

        dfd = os.open(self.dir or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            assert self.fd is not None
            mine = os.fstat(self.fd)
            try:
                cur = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                cur = None
            dropped = None
            if cur is not None and (cur.st_dev, cur.st_ino) == (mine.st_dev, mine.st_ino):
                # every row dropped before (the current file's marker) and the old file's rows
                dropped = (marker(read_file(self.path, 4096)) or 0) + rows_in(self.path + OLD_SUFFIX)
                os.replace(self.path, self.path + OLD_SUFFIX)
            os.close(self.fd)
            self.fd = os.open(self.path, _OPEN, 0o600)
            if dropped is not None and os.fstat(self.fd).st_size == 0:
                os.write(self.fd, row("", 0, "", "rotated", "", dropped))
        finally:
            os.close(dfd)

    def decision(self, host: str, port: int, address: str, decision: str, rule: str) -> None:
        data = row(host, port, address, decision, rule)
        with self.lock:
            self._write(data)
            self._count(host, port, decision, rule)

    def event(self, kind: str, cause: str) -> None:
        """A parse failure (malformed) or a slot refusal (no-slot): counted, written aggregated."""
        with self.lock:
            self.totals[kind] += 1
            self.pending[(kind, cause)] = self.pending.get((kind, cause), 0) + 1
            self.dirty = True

    # -- the counters ------------------------------------------------------------------------------
    def _count(self, host: str, port: int, decision: str, rule: str) -> None:
        self.totals[decision] += 1
        self.dirty = True
        e = self.dests.get(host)
        if e is None:
            allowed = decision != "denied"
            if (self.n_allowed >= MAX_ALLOWED) if allowed else (self.n_denied >= MAX_DENIED):
                key = f"{decision}:{rule}"
                self.other[key] = self.other.get(key, 0) + 1
                return
            if allowed:
                self.n_allowed += 1
            else:
                self.n_denied += 1
            e = self.dests[host] = {"allowed": 0, "denied": 0, "failed": 0, "bytes": 0, "ports": [], "rule": rule,
                                    "first": now(), "last": ""}
        e[decision] = e[decision] + 1
        e["rule"], e["last"] = rule, now()
        if port not in e["ports"] and len(e["ports"]) < MAX_PORTS:
            e["ports"].append(port)

    def add_bytes(self, host: str, n: int) -> None:
        with self.lock:
            self.totals["bytes"] += n
            e = self.dests.get(host)
            if e is not None:
                e["bytes"] += n
            self.dirty = True

    def flush(self, wait: bool = True) -> None:
        """The aggregated rows, then the counters file (write and rename: a reader sees a whole
        one). wait=False (on the way out, maybe in a signal handler): only if the lock is free soon."""
        if not self.lock.acquire(timeout=-1 if wait else 0.2):
            return
        try:
            for (kind, cause), n in self.pending.items():
                self._write(row("", 0, "", kind, cause, n))
            self.pending.clear()
            if not self.dirty or not self.counters_path:
                return
            self.dirty = False
            data = (json.dumps(self.totals, sort_keys=True) + "\n"
                    + json.dumps({"destinations": self.dests, "other": self.other}, sort_keys=True) + "\n").encode()
        finally:
            self.lock.release()
        replace_file(self.counters_path, data)

    def flusher(self) -> None:
        """The proxy's thread that writes the aggregated rows and counters."""
        while True:
            time.sleep(FLUSH_EVERY)
            self.flush()


def marker(head: bytes) -> int | None:
    """What a file's first row says was dropped before it (None: it is not a `rotated` row)."""
    try:
        r = json.loads(head.split(b"\n", 1)[0])
    except ValueError:
        return None
    ok = isinstance(r, dict) and r.get("decision") == "rotated" and type(r.get("count")) is int
    return r["count"] if ok else None


def rows_in(path: str) -> int:
    """The rows of a log file, its `rotated` row not counted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return 0
    n, first = 0, True
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            if first and marker(chunk) is not None:
                n -= 1
            first = False
            n += chunk.count(b"\n")
    return max(n, 0)


# -- reading (netlog, status) ------------------------------------------------------------------------

def read_file(path: str, limit: int) -> bytes:
    """Up to limit bytes of a regular file of the session's directory, never through a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def counter_files(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names if n.startswith(COUNTERS_PREFIX) and n.endswith(".json"))


def totals(directory: str) -> dict[str, int]:
    """The totals of every proxy of the session (the first line of each counters file only:
    `list` reads this)."""
    out: dict[str, int] = {}
    for path in counter_files(directory):
        try:
            t = json.loads(read_file(path, 4096).split(b"\n", 1)[0])
        except ValueError:
            continue
        if isinstance(t, dict):
            for k, v in t.items():
                if type(v) is int and v >= 0:
                    out[k] = out.get(k, 0) + v
    return out


def remove(directory: str) -> None:
    """Every record of the session's proxies (prune: the session is gone)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for n in names:
        if n.startswith((LOG_NAME, COUNTERS_PREFIX)):
            try:
                os.unlink(os.path.join(directory, n))
            except OSError:
                pass
