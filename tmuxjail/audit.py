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

import itertools
import json
import time
import unicodedata

from . import ahead, paths, stateaudit
from .ahead import Ahead
from .errors import FINDINGS, TmuxjailError
from .pane import command as pane_command
from .render import fail
from .scan import STAT_KINDS, scan
from .store import Store
from .subpath import below

TEXT_LIMIT = 200  # findings printed in text; JSON has them all
WALK_SECONDS = 60.0  # the audit's walk stops here and says so (an `incomplete` finding)
DETAIL_MAX = 300  # characters of a finding's detail, trigger and fix, printed and stored
PATH_MAX = 4096
MAX_REASONS = 20  # why a walk was incomplete: the first few, then a count
EVENT_MAX = 1 << 20  # bytes of one stored `audit` event
BASE_IDS = 24_000  # findings in the start's snapshot (`audit-base`): ~40 bytes each, under EVENT_MAX
INCOMPLETE = "incomplete"
# kind -> (what on the host will run or trust it, what to do); the walk's own `trigger`/`fix`
# on a finding win. Kinds the walk may add later fall back to DEFAULT.
REVIEW = "review it and restore or delete it before running that"
DEFAULTS = {
    "git-repo": ("your next git command in or under that directory", REVIEW),
    "git-config": ("your next git command in that repository (`git status`, `git commit`)",
                   "remove the key from that config (or restore the file) before running git there"),
    "git-hook": ("your next `git commit`, `git checkout` or `git merge` there", "delete the hook or restore it"),
    "git-commondir": ("your next git command in that worktree", REVIEW),
    "gitmodules": ("your next `git submodule update` or clone with submodules", REVIEW),
    "direnv": ("`cd` into that directory with direnv", f"{REVIEW}; do not `direnv allow` it unread"),
    "editor": ("opening that folder in the editor", REVIEW),
    "setuid": ("running that file: it runs as its owner", "remove the bit (chmod u-s) or delete the file"),
    "setgid": ("running that file: it runs with its group", "remove the bit (chmod g-s) or delete the file"),
    "symlink-out": ("any host tool that follows the link out of the workspace", "delete the link"),
    "hardlink": ("writing that file: another name for it may be outside the workspace",
                 "delete the extra name (or copy the file) before editing it"),
    INCOMPLETE: ("nothing yet: the audit did not see everything, so a finding may be missing",
                 "remove what stopped the walk (see the detail), then run the audit again"),
}
DEFAULT = ("a host tool that runs or trusts this path", REVIEW)


def workspaces(row) -> list[str]:
    try:
        return list(row.request_data.get("workspaces") or [row.workspace])
    except (TypeError, ValueError):
        return [row.workspace]


def snapshot(roots) -> dict:
    """The start's walk of its workspaces, as the `audit-base` event keeps it."""
    t0 = time.monotonic()
    s = scan(roots, stat_files=False)
    ids = {f["id"]: f["sig"] for f in s.findings}
    data = {"ids": dict(itertools.islice(ids.items(), BASE_IDS)), "entries": s.entries,
            "capped": s.capped[:MAX_REASONS], "ms": round((time.monotonic() - t0) * 1000, 1)}
    if len(ids) > BASE_IDS:  # past the event's bound: what is not in it reads as `added` (loud, not lost)
        data["partial"] = len(ids)
    return data


_AHEAD: tuple[Ahead | None, tuple[str, ...], int] | None = None  # the walk started ahead, its roots, its time


def snapshot_ahead(roots) -> None:
    """Start the snapshot in a child process (ahead.py) as soon as the workspaces are known: a
    big workspace takes tens of ms to walk (50 ms for 3,000 directories), which then overlap the
    policy's loading and resolution instead of following them. baseline() takes it."""
    global _AHEAD
    if _AHEAD is not None and _AHEAD[0] is not None:
        _AHEAD[0].cancel()
    roots = tuple(roots)
    since = time.time_ns()  # before the walk begins, as baseline() takes it
    _AHEAD = (ahead.start(snapshot, roots), roots, since)


def baseline(store, sid: str, roots) -> dict:
    """Record the snapshot before the jail can change anything: the one started ahead for these
    very roots if it answered well, else walked now. Its time is taken before its walk began, and
    the jail runs only after this returns (the spec is written after it)."""
    global _AHEAD
    taken, _AHEAD = _AHEAD, None
    data = None
    if taken is not None and taken[0] is not None:
        if taken[1] == tuple(roots):
            data = taken[0].result()
        else:
            taken[0].cancel()
    if isinstance(data, dict) and isinstance(data.get("ids"), dict) and isinstance(data.get("entries"), int):
        since = taken[2]  # type: ignore[index]
    else:
        # The jail starts hundreds of ms after this, far more than the file system's coarse clock
        # lags (a tick): what it changes has a later ctime, what was there before an earlier one.
        since = time.time_ns()
        data = snapshot(roots)
    data["since_ns"] = since
    store.event("audit-base", sid, **data)
    return data


def _base(store, sid: str) -> dict | None:
    r = store.db.execute("SELECT data FROM events WHERE session_id=? AND kind='audit-base' ORDER BY id DESC LIMIT 1",
                         (sid,)).fetchone()
    return json.loads(r[0]) if r else None


def run(store, row, show_all: bool = False, record: bool = True) -> dict:

    roots = workspaces(row)
    s = scan(roots, deadline=time.monotonic() + WALK_SECONDS)
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
        out.append(finding(f, change))
    # the CLI's own state, where it is bound back (verified)
    out += [finding(f, f.get("change") or "changed") for f in stateaudit.findings(store, row)]
    incomplete = [bounded(c, DETAIL_MAX) for c in s.capped[:MAX_REASONS]]
    if len(s.capped) > MAX_REASONS:
        incomplete.append(f"and {len(s.capped) - MAX_REASONS} more reasons")
    out += [finding({"kind": INCOMPLETE, "path": roots[0] if roots else "", "detail": c}, INCOMPLETE)
            for c in incomplete]
    result = {"id": row.id, "name": row.name, "mode": row.mode, "workspaces": roots,
              "since": "start" if base is not None else "everything present",
              "baseline": base is not None, "all": show_all, "findings": out, "count": len(out),
              "complete": not incomplete, "incomplete": incomplete,
              "entries": s.entries, "capped": incomplete, "skipped": s.skipped[:MAX_REASONS],
              "skipped_count": len(s.skipped)}
    if not show_all and base is None:
        result["note"] = "no snapshot from the session's start: showing everything present"
    if record and not show_all:
        store.event("audit", row.id, **stored(out, incomplete))
    return result


def finding(f: dict, change: str) -> dict:
    """One finding as reported and stored: each text bounded, and what will run it (the walk's
    `trigger`/`fix` when it gives them, else the kind's default)."""
    trigger, fix = DEFAULTS.get(f["kind"], DEFAULT)
    return {"kind": bounded(f["kind"], 40), "path": bounded(f["path"], PATH_MAX),
            "detail": bounded(f.get("detail") or "", DETAIL_MAX), "change": change,
            "trigger": bounded(f.get("trigger") or trigger, DETAIL_MAX),
            "fix": bounded(f.get("fix") or fix, DETAIL_MAX)}


def bounded(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def stored(findings: list[dict], incomplete: list[str]) -> dict:
    """The `audit` event: every count, and as many findings as fit in EVENT_MAX (the incomplete
    ones first, so `list` and `show` always know the audit did not see everything)."""
    ordered = sorted(findings, key=lambda f: f["kind"] != INCOMPLETE)
    budget = EVENT_MAX - 4096 - len(json.dumps(incomplete))
    keep = []
    for f in ordered:
        budget -= len(json.dumps(f)) + 2
        if budget < 0:
            break
        keep.append(f)
    return {"count": len(findings), "findings": keep, "stored": len(keep), "capped": bool(incomplete),
            "complete": not incomplete, "incomplete": incomplete}


LAST = "(SELECT max(id) FROM events WHERE kind='audit' GROUP BY session_id)"


def counts(store) -> dict[str, dict]:
    """`list`: the last audit of each session, without its findings: {id: {"count", "complete"}}
    (SQLite reads the two fields; up to a MiB of findings per session is never decoded)."""
    q = ("SELECT session_id, json_extract(data, '$.count'), json_extract(data, '$.complete'), "
         f"json_extract(data, '$.capped') FROM events WHERE id IN {LAST}")
    return {sid: {"count": n or 0, "complete": bool(done) if done is not None else not capped}
            for sid, n, done, capped in store.db.execute(q)}


def latest(store, ids=None) -> dict[str, dict]:
    """The last stored audit of each session: {session id: {"count", "at", "findings", "complete",
    "incomplete"}}."""
    q = f"SELECT session_id, at, data FROM events WHERE id IN {LAST}"
    out = {}
    for sid, at, data in store.db.execute(q):
        if ids is None or sid in ids:
            d = json.loads(data)
            out[sid] = {"count": d.get("count", 0), "at": at, "findings": d.get("findings", []),
                        "complete": d.get("complete", not d.get("capped")), "incomplete": d.get("incomplete", [])}
    return out


# -- the automatic report ---------------------------------------------------------------------

def run_hidden(argv: list[str]) -> int:
    """`tmuxjail _audit --id ID`: audit a session by id and store the result (no output)."""
    if len(argv) != 2 or argv[0] != "--id" or not pane_command.is_session_id(argv[1]):
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

    return code(result)


def code(result: dict) -> int:
    """FINDINGS when anything was found or the walk did not see everything, else 0."""
    return FINDINGS if result["count"] or not result.get("complete", True) else 0


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
        if below(path, r):
            return path[len(r.rstrip("/")) + 1:] if len(roots) == 1 else path
    return path


def line(f: dict, roots: list[str]) -> str:
    """One finding in one line (audit, show and the policy popup): what, where, what runs it, the fix."""
    mark = {"added": "+", "changed": "~", INCOMPLETE: "!"}.get(f.get("change", ""), " ")
    trigger, fix = DEFAULTS.get(f.get("kind", ""), DEFAULT)
    return (f"{mark} {f.get('kind')}  {clean(_rel(f.get('path', ''), roots))}: {clean(f.get('detail', ''))}"
            f"  [runs on: {clean(f.get('trigger') or trigger)}; fix: {clean(f.get('fix') or fix)}]")


def render(result: dict) -> str:
    roots = result["workspaces"]
    head = f"audit of {result['name']} ({result['mode']}), " + ", ".join(map(clean, roots))
    n = result["count"]
    what = "since the session started" if result["baseline"] and not result["all"] else "present"
    lines = [head, f"{n} finding{'s' if n != 1 else ''} {what}" + (":" if n else "")]
    if result.get("note"):
        lines.insert(1, f"note: {result['note']}")
    for f in result["findings"][:TEXT_LIMIT]:
        lines.append("  " + line(f, roots))
    if n > TEXT_LIMIT:
        lines.append(f"  ... and {n - TEXT_LIMIT} more (see --json)")
    if not result.get("complete", True):
        lines.append("NOT COMPLETE: the walk stopped early, so something may be missing (exit 6)")
    if result["skipped"]:
        shown = ", ".join(clean(_rel(p, roots)) for p in result["skipped"][:5])
        total = result.get("skipped_count", len(result["skipped"]))
        more = f" and {total - 5} more" if total > 5 else ""
        lines.append(f"not looked into: {shown}{more}")
    if n:
        lines.append("review these before running git, direnv or an editor in these directories")
    return "\n".join(lines)
