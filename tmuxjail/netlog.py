"""`tmuxjail show NAME --network`: the destinations a session's egress proxy allowed and denied.

The log (netproxy.LOG_NAME, one JSON object per line, under tmuxjail's state) is written outside
the jail, but the host names in it came from the jail: every row is re-checked here, and only
printable ASCII is ever shown."""

from __future__ import annotations

import json
import os

from .netproxy import LOG_NAME, session_dir

FIELDS = {"time": str, "host": str, "port": int, "address": str, "decision": str, "rule": str}
MAX_BYTES = 16 << 20


def _clean(text: str) -> str:
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in text)[:300]


def read(store: str, session_id: str) -> list[dict]:
    """The session's rows, oldest first; lines that are not exactly a row are skipped."""
    path = os.path.join(session_dir(store, session_id), LOG_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_BYTES)
    rows = []
    for line in data.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if (isinstance(row, dict) and set(row) == set(FIELDS)
                and all(type(row[k]) is t for k, t in FIELDS.items())):
            rows.append({k: _clean(v) if isinstance(v, str) else v for k, v in row.items()})
    return rows


def report(session: dict, store: str) -> dict:
    pol = session.get("policy") or {}
    return {"name": session["name"], "network": pol.get("network", "host"),
            "allow_domains": pol.get("allow_domains", []), "destinations": read(store, session["id"])}


def text(rep: dict) -> str:
    lines = [f"network: {rep['network']}"]
    if rep["network"] == "proxy":
        lines.append("allowed domains: " + (" ".join(rep["allow_domains"]) or "(none)"))
    rows = rep["destinations"]
    if not rows:
        lines.append("no destinations yet" if rep["network"] == "proxy" else "no proxy: nothing is logged")
    for r in rows:
        lines.append(f"{r['time']}  {r['decision']:<7}  {r['host']}:{r['port']}  "
                     f"{r['address'] or '-'}  ({r['rule']})")
    return "\n".join(lines)
