"""The MCP broker's call log (issue 31): one JSON line per tools/call (and per refused method),
never arguments or results, rotated; and counters no rotation loses. Written by the broker
(net/broker.py), read by `show --mcp` and `list`. Stdlib only, and lean: `list` loads it."""

from __future__ import annotations

import json
import os
import threading
import time

from .record import replace_file

MAX_TOOL_NAME = 256  # in the log: a tool name is the jail's text
SAVE_EVERY = 0.5  # s: the counters file is at most this much behind while calls come
MAX_KEYS = 1000  # distinct (server, tool, decision) counters; the rest are counted as "(other)"


class CallLog:
    """JSON lines, one per tools/call, appended; rotated to path + ".1" once over max_bytes."""

    def __init__(self, path: str, max_bytes: int = 1 << 20):
        self.path, self.max_bytes = path, max_bytes
        self._lock = threading.Lock()
        self._fd = self._open()
        # Counters no rotation loses (a jail that floods refusals rotates the lines away): one
        # file per broker (each pane has its own), summed by read_counts.
        self.counts: dict[tuple[str, str, str], int] = {}
        self.counts_path = f"{path}.counts-{os.getpid()}"
        self._saved, self._dirty = 0.0, False

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def add(self, server: str, tool: str, decision: str) -> None:
        line = json.dumps({"t": time.time(), "server": server, "tool": tool[:MAX_TOOL_NAME],
                           "decision": decision}) + "\n"
        key = (server, tool[:MAX_TOOL_NAME], decision)
        with self._lock:
            if key not in self.counts and len(self.counts) >= MAX_KEYS:
                key = (server, "(other)", decision)
            self.counts[key] = self.counts.get(key, 0) + 1
            # Saved at most every SAVE_EVERY s on a call's way (it costs a call ~0.4 ms), and by
            # flush(): when a connection ends, and by the broker's own clock.
            self._dirty = True
            if time.monotonic() - self._saved >= SAVE_EVERY:
                self._save_counts()
            os.write(self._fd, line.encode())
            if os.fstat(self._fd).st_size > self.max_bytes:
                os.replace(self.path, self.path + ".1")
                os.close(self._fd)
                self._fd = self._open()

    def flush(self) -> None:
        with self._lock:
            if self._dirty:
                self._save_counts()

    def _save_counts(self) -> None:
        self._saved, self._dirty = time.monotonic(), False
        replace_file(self.counts_path, json.dumps([[*k, n] for k, n in self.counts.items()]).encode())

    def close(self) -> None:
        with self._lock:
            if self._dirty:
                self._save_counts()
            os.close(self._fd)


def read_counts(path: str) -> list[dict]:
    """Every broker's counters of the log at path, summed: [{server, tool, decision, count}]."""
    import glob

    total: dict[tuple[str, str, str], int] = {}
    for name in glob.glob(glob.escape(path) + ".counts-*[0-9]"):
        try:
            with open(name, "rb") as f:
                rows = json.loads(f.read(64 << 20))
        except (OSError, ValueError):
            continue
        for row in rows if isinstance(rows, list) else ():
            if isinstance(row, list) and len(row) == 4 and all(isinstance(x, str) for x in row[:3]) \
                    and isinstance(row[3], int):
                total[tuple(row[:3])] = total.get(tuple(row[:3]), 0) + row[3]
    return [{"server": s, "tool": t, "decision": d, "count": n} for (s, t, d), n in sorted(total.items())]


def read_log(path: str) -> list[dict]:
    """Every entry of the log and its rotated file, oldest first; a malformed line is skipped."""
    out = []
    for name in (path + ".1", path):
        try:
            with open(name, "rb") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                out.append(entry)
    return out


