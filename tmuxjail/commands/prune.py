"""`tmuxjail prune`: forget sessions that are over (stopped, failed, gone), never a live one.

What is live is decided as `list` decides it, on each session's own tmux server: a session with a
pane there (running or exited: it can be resumed in place) is kept, and so is one whose server
exists but does not answer (`unreachable`: it may be running there). A row is deleted only if it is still exactly what was
checked (same status and update time), and each deletion leaves a `prune` event with what the
row said. The session's network directory goes with it (its log: `show --network` reads it only
through the row; a live proxy's socket is never removed). Private homes, workspaces and the event
log are not touched. `--homes` deletes private homes instead (prune_homes)."""

from __future__ import annotations

import calendar
import os
import re
import time

from .. import worktree
from ..context import Context
from ..errors import UsageError
from ..net import proxy as netproxy
from ..net import record as netrecord
from ..paths import remove_tree
from ..render import Result, size
from ..status import rows
from . import Call
from .table import DRY_RUN, JSON, Arg, declares

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


def home_candidates(ctx: Context) -> list[dict]:
    """Private homes of workspaces (homes/<provider>/ws-*, not `--env` homes, which are shared on
    purpose) whose sessions are all over and whose workspaces are all gone, or that no session
    names at all. A home a live session (running, exited, gone: resumable) uses is kept."""
    by_home: dict[str, list[dict]] = {}
    for d in rows(ctx, include_stopped=True, activity=False):
        if d["kind"] == "agent" and d["private_home"]:
            by_home.setdefault(os.path.realpath(d["private_home"]), []).append(d)
    out = []
    top = ctx.paths.homes
    for provider in sorted(os.listdir(top)) if top.is_dir() else []:
        pdir = top / provider
        if pdir.is_symlink() or not pdir.is_dir():
            continue
        for entry in sorted(os.listdir(pdir)):
            home = pdir / entry
            if not entry.startswith("ws-") or home.is_symlink() or not home.is_dir():
                continue
            sessions = by_home.get(os.path.realpath(home), [])
            if any(d["status"] not in PRUNABLE for d in sessions):
                continue
            workspaces = sorted({d["workspace"] for d in sessions if d["workspace"]})
            if sessions and any(os.path.isdir(w) for w in workspaces):
                continue
            out.append({"home": str(home), "provider": provider, "bytes": disk_usage(home),
                        "workspaces": workspaces, "sessions": [d["name"] for d in sessions],
                        "why": "its workspace no longer exists" if sessions else "no session uses it"})
    return out


def disk_usage(path) -> int:
    total = 0
    for root, dirs, files in os.walk(path, onerror=lambda e: None):
        for n in dirs + files:
            try:
                total += os.lstat(os.path.join(root, n)).st_blocks * 512
            except OSError:
                pass
    return total


def prune_worktrees(ctx: Context, force: bool, dry_run: bool) -> list[dict]:
    """Worktrees whose sessions are all over (stopped, failed, gone, or none left), landed ones
    only unless forced. Each goes with its git directory and its branch in the repository (the
    branch only while it is what the agent left: a branch the user moved since stays)."""
    live: set[str] = set()
    for d in rows(ctx, include_stopped=True, activity=False):
        if d["kind"] == "agent" and d["status"] not in PRUNABLE and d.get("worktree"):
            live.add(d["worktree"]["id"])
    out = []
    for wt in worktree.all_worktrees(ctx.paths.state_dir):
        if wt["id"] in live:
            continue
        done = worktree.landed(wt)
        if not (done or force):
            continue
        item = {"id": wt["id"], "name": wt["name"], "branch": wt["branch"], "path": wt["path"], "repository": wt["repo"],
                "why": "landed" if done else "not landed: --force"}
        if not dry_run:
            worktree.remove(wt)
            ctx.store.event("prune-worktree", None, **item)
        out.append(item)
    return out


def prune_homes(ctx: Context, dry_run: bool) -> list[dict]:
    found = home_candidates(ctx)
    if dry_run:
        return found
    done = []
    for c in found:
        remove_tree(c["home"])
        ctx.store.event("prune-home", None, home=c["home"], bytes=c["bytes"], workspaces=c["workspaces"])
        done.append(c)
    return done


@declares("tmuxjail prune --older-than 30d --dry-run",
          Arg("--older-than", metavar="AGE", help="only those unchanged for AGE (30d, 12h, 45m, 2w)"),
          DRY_RUN.but(help="show what would be pruned"),
          Arg("--homes", action="store_true",
              help="instead: delete the private homes (isolated mode) of workspaces that no longer exist or "
                   "have no session left, with their sizes (try --dry-run first)"),
          Arg("--worktrees", action="store_true",
              help="instead: delete the worktrees (and their branches) of --worktree sessions that were landed "
                   "and are not running (try --dry-run first)"),
          Arg("--force", action="store_true", help="with --worktrees: also those not landed (their work is lost)"),
          JSON)
def run(call: Call) -> Result:
    a = call.args
    if a.force and not a.worktrees:
        raise UsageError("--force goes with --worktrees")
    if a.worktrees:
        if a.older_than or a.homes:
            raise UsageError("--worktrees takes neither --older-than nor --homes")
        gone = prune_worktrees(call.ctx, a.force, a.dry_run)
        verb = "would delete" if a.dry_run else "deleted"
        return Result({"dry_run": a.dry_run, "worktrees": gone},
                      f"{verb} {len(gone)} worktree(s)" + "".join(
                          f"\n  {w['path']}  ({w['branch']}, {w['why']})" for w in gone))
    if a.homes:
        if a.older_than:
            raise UsageError("--older-than is for sessions; --homes takes no age")
        homes = prune_homes(call.ctx, a.dry_run)
        verb = "would delete" if a.dry_run else "deleted"
        total = sum(h["bytes"] for h in homes)
        return Result({"dry_run": a.dry_run, "homes": homes, "bytes": total},
                      f"{verb} {len(homes)} private home(s), {size(total)}"
                      + "".join(f"\n  {size(h['bytes']):>9}  {h['home']}  ({h['why']}"
                                + (f": {', '.join(h['workspaces'])})" if h["workspaces"] else ")") for h in homes))
    done = prune(call.ctx, parse_age(a.older_than), a.dry_run)
    verb = "would prune" if a.dry_run else "pruned"
    space = None if a.dry_run else call.ctx.store.reclaim()
    text = f"{verb} {len(done)} session(s)" + "".join(f"\n  {d['name']} ({d['status']})" for d in done)
    if space:
        text += (f"\nstore: {_mib(space['bytes_before'])} -> {_mib(space['bytes_after'])}"
                 f" ({space['events_dropped']} superseded audit event(s) dropped)")
    return Result({"dry_run": a.dry_run, "sessions": done, "store": space}, text)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
