"""`tmuxjail audit`: what in a session's workspaces the host will later run or trust, and what of
it changed since the session started.

At start, one walk (scan.py) records an id and a signature per finding in an `audit-base` event
(ids and hashes only: a few dozen bytes per finding), and the time. An audit walks again and
reports findings whose id is new (`added`) or whose signature differs (`changed`); setuid/setgid
files always (`added` when their inode changed after the start: ctime, which a jail cannot set
back), hard links only when added; `--all` reports everything.
Each audit is stored as an `audit` event, which `list` and `show` read. Owned strict sessions
run it themselves when a pane dies (a `pane-died` hook whose command holds only the session id
and tmuxjail's own interpreter path), and `stop` runs it too."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
import unicodedata

from . import paths, stateaudit
from .errors import FINDINGS, TmuxjailError
from .render import fail
from .scan import STAT_KINDS, scan
from .store import Store

ID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TEXT_LIMIT = 200  # findings printed in text; JSON has them all


def workspaces(row) -> list[str]:
    try:
        return list(row.request_data.get("workspaces") or [row.workspace])
    except (TypeError, ValueError):
        return [row.workspace]


def baseline(store, sid: str, roots) -> dict:

    # The jail starts hundreds of ms after this, far more than the file system's coarse clock
    # lags (a tick): what it changes has a later ctime, what was there before an earlier one.
    since = time.time_ns()
    t0 = time.monotonic()
    s = scan(roots, stat_files=False)
    data = {"ids": {f["id"]: f["sig"] for f in s.findings}, "since_ns": since, "entries": s.entries,
            "capped": s.capped, "ms": round((time.monotonic() - t0) * 1000, 1)}
    store.event("audit-base", sid, **data)
    return data


def _base(store, sid: str) -> dict | None:
    r = store.db.execute("SELECT data FROM events WHERE session_id=? AND kind='audit-base' ORDER BY id DESC LIMIT 1",
                         (sid,)).fetchone()
    return json.loads(r[0]) if r else None


def run(store, row, show_all: bool = False, record: bool = True) -> dict:

    roots = workspaces(row)
    s = scan(roots)
    base = None if show_all else _base(store, row.id)
    out = []
    for f in s.findings:
        if f["kind"] in STAT_KINDS:
            new = base is not None and f["ctime"] >= base.get("since_ns", 0)
            if f["kind"] == "hardlink" and base is not None and not new:
                continue
            change = "added" if new else "present"
        elif base is None:
            change = "present"
        elif f["id"] not in base["ids"]:
            change = "added"
        elif base["ids"][f["id"]] != f["sig"]:
            change = "changed"
        else:
            continue
        out.append({"kind": f["kind"], "path": f["path"], "detail": f["detail"], "change": change})
    out += stateaudit.findings(store, row)  # the CLI's own state, where it is bound back (verified)
    result = {"id": row.id, "name": row.name, "mode": row.mode, "workspaces": roots,
              "since": "start" if base is not None else "everything present",
              "baseline": base is not None, "all": show_all, "findings": out, "count": len(out),
              "entries": s.entries, "capped": s.capped, "skipped": s.skipped}
    if not show_all and base is None:
        result["note"] = "no snapshot from the session's start: showing everything present"
    if record and not show_all:
        store.event("audit", row.id, count=len(out), findings=out[:500], capped=bool(s.capped))
    return result


def latest(store, ids=None) -> dict[str, dict]:
    """The last stored audit of each session: {session id: {"count", "at", "findings"}}."""
    q = ("SELECT session_id, at, data FROM events WHERE id IN "
         "(SELECT max(id) FROM events WHERE kind='audit' GROUP BY session_id)")
    out = {}
    for sid, at, data in store.db.execute(q):
        if ids is None or sid in ids:
            d = json.loads(data)
            out[sid] = {"count": d.get("count", 0), "at": at, "findings": d.get("findings", [])}
    return out


# -- the automatic report ---------------------------------------------------------------------

def hook_command(sid: str) -> str:
    """The pane-died hook of an owned strict session: a tmux command holding only the session id
    (checked to be a uuid) and our interpreter's path, escaped for tmux's parser (inside double
    quotes) and for run-shell's format expansion (# doubled)."""
    if not ID_RE.match(sid):
        raise ValueError(f"not a session id: {sid!r}")
    sh = shlex.join([sys.executable, "-E", "-P", "-m", "tmuxjail", "_audit", "--id", sid])
    sh = f"exec {sh} </dev/null >/dev/null 2>&1"
    for a, b in (("\\", "\\\\"), ('"', '\\"'), ("$", "\\$"), ("#", "##")):
        sh = sh.replace(a, b)
    return f'run-shell -b "{sh}"'


def session_hooks(sid: str, mode: str) -> dict[str, str]:
    return {} if mode == "compatibility" else {"pane-died": hook_command(sid)}


def run_hidden(argv: list[str]) -> int:
    """`tmuxjail _audit --id ID`: audit a session by id and store the result (no output)."""
    if len(argv) != 2 or argv[0] != "--id" or not ID_RE.match(argv[1]):
        fail("usage: tmuxjail _audit --id SESSION_ID")
        return 2

    try:
        store = Store(paths.get().store)
        row = store.find(argv[1])
        if row is None or row.id != argv[1]:
            return 1
        result = run(store, row)
    except TmuxjailError as exc:
        fail(exc.message)
        return exc.code
    except Exception as exc:  # noqa: BLE001 - a hook has no terminal: one line for whoever runs it by hand
        fail(f"audit failed: {exc.__class__.__name__}: {exc}")
        return 1

    return FINDINGS if result["count"] else 0


# -- text -------------------------------------------------------------------------------------

def clean(s: str) -> str:
    """A path or value from the jail, safe to print: control, format (bidi) and undecodable
    characters become visible escapes."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{o - 0xDC00:02x}")
        elif o < 0x20 or 0x7F <= o < 0xA0:
            out.append(f"\\x{o:02x}")
        elif unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    return "".join(out)


def _rel(path: str, roots: list[str]) -> str:
    for r in roots:
        if path.startswith(r.rstrip("/") + "/"):
            return path[len(r.rstrip("/")) + 1:] if len(roots) == 1 else path
    return path


def render(result: dict) -> str:
    roots = result["workspaces"]
    head = f"audit of {result['name']} ({result['mode']}), " + ", ".join(map(clean, roots))
    n = result["count"]
    what = "since the session started" if result["baseline"] and not result["all"] else "present"
    lines = [head, f"{n} finding{'s' if n != 1 else ''} {what}" + (":" if n else "")]
    if result.get("note"):
        lines.insert(1, f"note: {result['note']}")
    width = max((len(f["kind"]) for f in result["findings"]), default=0)
    for f in result["findings"][:TEXT_LIMIT]:
        mark = {"added": "+", "changed": "~"}.get(f["change"], " ")
        lines.append(f"  {mark} {f['kind']:{width}}  {clean(_rel(f['path'], roots))}: {clean(f['detail'])}")
    if n > TEXT_LIMIT:
        lines.append(f"  ... and {n - TEXT_LIMIT} more (see --json)")
    for c in result["capped"]:
        lines.append(f"not complete: {clean(c)}")
    if result["skipped"]:
        shown = ", ".join(clean(_rel(p, roots)) for p in result["skipped"][:5])
        more = f" and {len(result['skipped']) - 5} more" if len(result["skipped"]) > 5 else ""
        lines.append(f"not looked into: {shown}{more}")
    if n:
        lines.append("review these before running git, direnv or an editor in these directories")
    return "\n".join(lines)
