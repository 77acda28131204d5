"""`tmuxjail prune`: forget sessions that are over (stopped, failed, gone), never a live one.

What is live is decided as `list` decides it, on each session's own tmux server: a session with a
pane there (running or exited: it can be resumed in place) is kept, and so is one whose server
exists but does not answer (`unreachable`: it may be running there). A row is deleted only if it is still exactly what was
checked (same status and update time), and each deletion leaves a `prune` event with what the
row said. The session's network directory goes with it (its log: `show --network` reads it only
through the row; a live proxy's socket is never removed). Private homes, workspaces and the event
log are not touched."""

from __future__ import annotations

import calendar
import os
import re
import time

from .. import netproxy, netrecord
from ..context import Context
from ..errors import UsageError
from ..render import Result
from ..status import rows
from . import Call

PRUNABLE = ("stopped", "failed", "gone")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str | None) -> int:
    """Seconds in `30d`, `12h`, `45m`, `90s`, `2w` (or a bare number of days)."""
    if text is None:
        return 0
    m = re.fullmatch(r"(\d{1,6})([smhdw]?)", text.strip())
    if not m:
        raise UsageError(f"invalid duration {text!r}", hint="e.g. 30d, 12h, 45m, 2w")
    return int(m.group(1)) * UNITS[m.group(2) or "d"]


def _age(stamp: str | None, now: float) -> float:
    try:
        return now - calendar.timegm(time.strptime(stamp or "", "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return 0.0  # unknown age: never old enough


def candidates(ctx: Context, older_than: int) -> list[dict]:
    now = time.time()
    records = {r.id: r for r in ctx.readonly_store().sessions(include_stopped=True)}
    out = []
    for d in rows(ctx, include_stopped=True, activity=False):
        row = records.get(d["id"])
        if d["kind"] != "agent" or row is None or d["status"] not in PRUNABLE:
            continue
        if _age(row.updated_at, now) < older_than:
            continue
        out.append({"id": row.id, "name": row.name, "provider": row.provider, "mode": row.mode,
                    "status": d["status"], "workspace": row.workspace, "updated_at": row.updated_at})
    return out


def prune(ctx: Context, older_than: int, dry_run: bool) -> list[dict]:
    found = candidates(ctx, older_than)
    if dry_run or not found:
        return found
    store = ctx.store
    done = []
    for c in found:
        if store.delete_session(c["id"], c["updated_at"]):
            forget_network(netproxy.session_dir(str(ctx.paths.store), c["id"]))
            store.event("prune", c["id"], **{k: c[k] for k in ("name", "provider", "mode", "status", "workspace")})
            done.append(c)
    return done


def forget_network(directory: str) -> None:
    """The sockets of dead proxies, then the log and counters; the directory only once nothing
    else is left."""
    netproxy.clear_stale(directory)
    netrecord.remove(directory)
    try:
        os.rmdir(directory)
    except OSError:
        pass


def run(call: Call) -> Result:
    a = call.args
    done = prune(call.ctx, parse_age(a.older_than), a.dry_run)
    verb = "would prune" if a.dry_run else "pruned"
    return Result({"dry_run": a.dry_run, "sessions": done},
                  f"{verb} {len(done)} session(s)" + "".join(f"\n  {d['name']} ({d['status']})" for d in done))
