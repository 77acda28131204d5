"""A session's own conversation id, for a CLI that takes none up front (Codex: its state shows the
id only once the first message is sent). Learned, in this order, from the running CLI's open
conversation file, from its exit note on the dead pane, or from its state; every candidate is
checked against the state. That state lies in a tree the jail writes (its home), so it is read
with no link followed, sizes and counts bounded, the id's format checked, and an id another
session holds, or a conversation two sessions could both have made, is never taken: with no id
learned, resume starts a new conversation rather than guess."""

from __future__ import annotations

import json
import os
import re
import stat
from datetime import datetime, timedelta

MAX_FIRST_LINE = 256 << 10  # Codex's session_meta line is about 27 KB (0.171.0)
MAX_ENTRIES = 5000  # directory entries looked at, per learn
MAX_READS = 64  # conversation files opened, per learn
MAX_PROCS = 256
MAX_FDS = 4096
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NAME_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})T")


Found = dict[str, tuple[str, str]]  # conversation id -> (its recorded start, its cwd)


def _walk(root_fd: int, pattern: re.Pattern, since_day: str, depth: int, budget: list[int], out: list):
    """Files below root_fd whose names match pattern: (id, dir fd, name); dirs only by O_NOFOLLOW."""
    try:
        entries = list(os.scandir(root_fd))
    except OSError:
        return
    for e in entries:
        budget[0] -= 1
        if budget[0] < 0:
            return
        m = pattern.fullmatch(e.name)
        if m and e.is_file(follow_symlinks=False):
            day = _NAME_DAY.search(e.name)
            if day is None or "-".join(day.groups()) >= since_day:
                out.append((m.group(1), root_fd, e.name))
        elif depth > 0 and e.is_dir(follow_symlinks=False) and e.name.isdigit():
            try:
                fd = os.open(e.name, _DIR, dir_fd=root_fd)
            except OSError:
                continue
            _walk(fd, pattern, since_day, depth - 1, budget, out)


def _open_root(path: str) -> int | None:
    """The directory at path, opened one component at a time with no link followed."""
    if not os.path.isabs(path):
        return None
    try:
        fd = os.open("/", _DIR)
    except OSError:
        return None
    for part in [p for p in path.split("/") if p]:
        try:
            nxt = os.open(part, _DIR, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nxt
    return fd


def _first_line(dir_fd: int, name: str) -> dict | None:
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_FIRST_LINE)
    except OSError:
        return None
    finally:
        os.close(fd)
    line, nl, _ = data.partition(b"\n")
    if not nl:
        return None
    try:
        head = json.loads(line)
    except ValueError:
        return None
    payload = head.get("payload") if isinstance(head, dict) else None
    return payload if isinstance(payload, dict) else None


def conversations(state_root: str, file_re: str, since: str) -> Found:
    """The conversation files under state_root made on or after since (ISO UTC), id -> (its
    recorded start, its cwd). A file whose first line does not name the id of its file name is
    not one."""
    found: Found = {}
    root = _open_root(state_root)
    if root is None:
        return found
    day = (datetime.strptime(since[:10], "%Y-%m-%d") - timedelta(days=1)).strftime("%Y-%m-%d")  # names: local time
    hits: list = []
    _walk(root, re.compile(file_re), day, 3, [MAX_ENTRIES], hits)
    opened = {h[1] for h in hits} | {root}
    try:
        for cid, dir_fd, name in hits[-MAX_READS:]:
            meta = _first_line(dir_fd, name)
            if not meta or meta.get("id") != cid:
                continue
            ts, cwd = meta.get("timestamp"), meta.get("cwd")
            if isinstance(ts, str) and isinstance(cwd, str) and ts[:19] >= since[:19]:
                found[cid] = (ts, cwd)
    finally:
        for fd in opened:
            os.close(fd)
    return found


def never_began(home: str, rel: str) -> bool:
    """True only when the conversation file home/rel surely does not exist: every directory above
    it opened with no link followed, and the name absent (else, links or errors: False)."""
    parent, _, name = rel.rpartition("/")
    fd = _open_root(f"{home}/{parent}") if parent else _open_root(home)
    if fd is None:
        # Its directory missing below a real one (no link on the way): no conversation began.
        at = f"{home}/{parent}"
        while not os.path.lexists(at) and at != "/":
            at = os.path.dirname(at)
        if at == f"{home}/{parent}" or (top := _open_root(at)) is None:
            return False
        os.close(top)
        return True
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
        return False
    except FileNotFoundError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def open_ids(pane_pid: int, file_re: str) -> list[str]:
    """Ids of the conversation files the pane's processes hold open (Codex keeps its rollout open
    while it runs). Only the names of the links are read, never followed."""
    pat = re.compile(file_re)
    ids, todo, seen = [], [pane_pid], 0
    while todo and seen < MAX_PROCS:
        pid = todo.pop()
        seen += 1
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as kids:
                todo += [int(k) for k in kids.read().split()[:MAX_PROCS]]
            fds = os.listdir(f"/proc/{pid}/fd")[:MAX_FDS]
        except (OSError, ValueError):
            continue
        for fd in fds:
            try:
                m = pat.fullmatch(os.path.basename(os.readlink(f"/proc/{pid}/fd/{fd}")))
            except OSError:
                continue
            if m and m.group(1) not in ids:
                ids.append(m.group(1))
    return ids


def screen_ids(text: str, screen_re: str) -> list[str]:
    return re.findall(screen_re, text)


def overlaps(row, other) -> bool:
    """Could other's CLI have made a conversation while row's ran (same workspace)?"""
    row_end = row.updated_at if row.status == "stopped" else "9999"
    other_end = other.updated_at if other.status == "stopped" else "9999"
    return other.created_at <= row_end and row.created_at <= other_end


def choose(row, found: Found, claimed: set[str], told: list[str], rivals: list) -> str | None:
    """The id to record for row: one the CLI itself showed (open file, exit note) that its state
    confirms, else the only conversation of row's workspace made in its time when no other session
    of that workspace ran then; else None."""
    mine = {cid: v for cid, v in found.items() if v[1] == row.workspace and cid not in claimed}
    for cid in told:
        if cid in mine:
            return cid
    if told:  # what the CLI said is not confirmed: no guess against it
        return None
    if row.status == "stopped":
        mine = {c: v for c, v in mine.items() if v[0][:19] <= row.updated_at[:19]}
    if len(mine) == 1 and not any(overlaps(row, o) for o in rivals):
        return next(iter(mine))
    return None


def learn(ctx, row, conv, pane=None) -> str | None:
    """row's conversation id, learned now (and recorded) if it was not known; pane: its jailed
    pane on its own server, alive (the open file) or dead (the exit note), if there is one."""
    if row.native_id or conv is None:
        return row.native_id
    told: list[str] = []
    if pane is not None and pane.pane_dead != "1" and str(pane.pane_pid).isdigit():
        told = open_ids(int(pane.pane_pid), conv.file)
    elif pane is not None:
        told = screen_ids(ctx.tmux.capture(pane.pane_id), conv.screen)[::-1]  # the last note first
    home = row.private_home or (row.policy_data or {}).get("home") or ctx.env.get("HOME", "")
    found = conversations(f"{home}/{conv.state_dir}", conv.file, row.created_at)
    others = [o for o in ctx.store.sessions(include_stopped=True) if o.id != row.id and o.provider == row.provider]
    cid = choose(row, found, {o.native_id for o in others if o.native_id},
                 told, [o for o in others if o.workspace == row.workspace])
    if cid:
        ctx.store.update_session(row.id, native_id=cid)
        ctx.store.event("conversation", row.id, native_id=cid)
    return cid
