"""Provider state that a verified jail can still write and the host's plain CLI obeys as commands,
where neither a read-only bind nor a private copy fits (Pi's auth.json: docs/provider-state.md).
Its digest is recorded when the session starts (a `state-base` event); `tmuxjail audit` names a
file whose digest changed, with what will run it and what to do."""

from __future__ import annotations

import json
import os
import stat

from .adapters import get as get_adapter
from .canon import sha256
from .errors import SandboxUnavailable
from .paths import dir_beneath
from .subpath import below

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

KIND = "provider-state"
MAX_BYTES = 64 * 1024 * 1024


def digest(path: str, roots) -> str | None:
    """sha256 of path (None: absent), opened beneath the bound root that holds it without following
    a link: the jail could have replaced anything below that root. A link or a non-file is "link"."""
    under = [r for r in roots if below(path, r)]
    if not under:
        return None
    try:
        dfd = dir_beneath(min(under, key=len), os.path.dirname(path))
    except (SandboxUnavailable, OSError):
        return "link"
    try:
        fd = os.open(os.path.basename(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError:
        return "link"
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "link"
        head = sha256(os.read(fd, MAX_BYTES)).hexdigest()
        # Past MAX_BYTES the content is not read: its size and ctime (which a jail cannot set
        # back) stand for the rest, so padding a file cannot hide a change made after the pad.
        return str(head) if st.st_size <= MAX_BYTES else f"{head}:{st.st_size}:{st.st_ctime_ns}"
    finally:
        os.close(fd)


def baseline(store, sid: str, policy: dict[str, Any]) -> None:
    files = policy.get("state_audit") or ()
    if files:
        store.event("state-base", sid, files={p: digest(p, policy["host_write"]) for p in files})


def findings(store, row) -> list[dict[str, Any]]:
    """The audited state files changed since the session started (none without a baseline)."""
    pol = row.policy_data or {}
    files = pol.get("state_audit") or ()
    if not files:
        return []
    r = store.db.execute("SELECT data FROM events WHERE session_id=? AND kind='state-base' ORDER BY id DESC LIMIT 1",
                         (row.id,)).fetchone()
    if r is None:
        return []
    base = json.loads(r[0]).get("files", {})
    plain = get_adapter(row.provider).plain or row.provider
    out = []
    for path in files:
        was, now = base.get(path), digest(path, pol.get("host_write", ()))
        if now == was:
            continue
        out.append({
            "kind": KIND, "path": path, "change": "added" if was is None else "changed",
            "detail": f"the {plain} CLI's own state, " + ("removed" if now is None else "written by the jail"),
            "trigger": f"your next plain `{plain}`",
            "fix": f"read it before you run {plain}: a value starting with '!' is a shell command {plain} runs; "
                   "restore your copy or log in again",
        })
    return out
