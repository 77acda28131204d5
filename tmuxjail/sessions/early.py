"""The early pane: a start of a request that started before spawns its pane first, on the
fingerprint that request resolved to last time, and resolves the policy while tmux and the
launcher's interpreter start (docs/performance.md: about 15 ms of a 90 ms start).

Nothing here decides what runs. The pane's start command carries the hinted fingerprint, as any
pane's carries its own; the launcher waits (pane/spec.py, at most WAIT seconds, while the spec's
`.pending` marker exists) for a spec, and checks it against that fingerprint and the store as it
always does. sessions/start.py writes the spec only when the request resolved to exactly what
the pane was opened with (fingerprint and mode; the name is the pane's own); on anything else, a change
or a failure, it kills that session and starts as it would have without it. A wrong or planted
hint therefore costs one killed pane, never a different jail. Only for a new session of its own
(not --here/--split), strict or not but never verified (which may ask a human first), never a
dry run, --restrict, a discovery candidate or trace, and not on macOS."""

from __future__ import annotations

import json
import os
import re
import sys

from .. import hostos
from ..canon import sha256_hex
from ..pane import command as pane_command
from ..paths import ensure_private_dir
from ..record import Record
from ..registry import Mode
from ..store import new_id
from .place import session_name

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ..context import Context
    from ..request import StartRequest

DIR = "hints"
FORMAT = 1
FP_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")
SHOWN = (Mode.compatibility.value, f"{Mode.compatibility.value}-unguarded", Mode.isolated.value)  # jail.display_mode, not verified
MAX_HINT = 4096


class Hint(Record):
    fp: str
    shown: str  # the mode list shows (jail.display_mode)
    mode: str


class Early(Record):
    """A pane opened on a hint, not yet given its spec."""

    name: str
    sid: str
    hint: Hint
    spec: Path
    status: Path
    pending: Path  # while it exists, the launcher waits for the spec
    pane: Callable[[], str]  # waits for tmux new-session: the pane id, or its error


def eligible(opts: StartRequest) -> bool:
    return not (opts.dry_run or opts.restriction is not None or opts.candidate is not None
                or opts.trace is not None or hostos.darwin())


def hint_path(ctx: Context, opts: StartRequest) -> Path:
    """Keyed by everything of the request but its name and how it is shown, and by the server."""
    request = opts._replace(name=None, detach=False, non_interactive=False).to_json()
    key = json.dumps([FORMAT, request, ctx.tmux.base, os.getuid()], sort_keys=True)
    return ctx.paths.state_dir / DIR / f"{sha256_hex(key.encode())[:32]}.json"


def read_hint(path: Path) -> Hint | None:
    """The hint, or None for anything but a small regular file of ours holding a valid one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not (st.st_uid == os.getuid() and st.st_size <= MAX_HINT and (st.st_mode & 0o170000) == 0o100000):
            return None
        data = json.loads(os.read(fd, MAX_HINT + 1))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(data, dict):
        return None
    fp, shown, mode = data.get("fp"), data.get("shown"), data.get("mode")
    if not (isinstance(fp, str) and FP_RE.match(fp) and shown in SHOWN
            and mode in (Mode.compatibility.value, Mode.isolated.value)):
        return None
    return Hint(fp, str(shown), str(mode))


def write_hint(ctx: Context, opts: StartRequest, hint: Hint) -> None:
    """After a start (not on its critical path); a hint that cannot be written is no hint."""
    if not eligible(opts):
        return
    path = hint_path(ctx, opts)
    if hint.mode not in (Mode.compatibility.value, Mode.isolated.value):
        _unlink(path)  # the request now resolves to a mode the early pane is not for
        return
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}")
    try:
        ensure_private_dir(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(hint._asdict(), f)
        os.replace(tmp, path)
    except OSError:
        _unlink(tmp)


def spawn(ctx: Context, opts: StartRequest) -> Early | None:
    """The pane, on the request's hint; None (and nothing made) when there is none, or anything
    about it fails: the start then goes as it would have."""
    if not eligible(opts):
        return None
    hint = read_hint(hint_path(ctx, opts))
    if hint is None:
        return None
    pending = None
    try:
        name = session_name(ctx, opts)
        sid = new_id()
        spool = ensure_private_dir(ctx.paths.spool)
        token = os.urandom(8).hex()
        spec, status = spool / f"{sid}-{token}.json", spool / f"{sid}-{token}.status"
        pending = spec.with_name(spec.name + ".pending")
        os.close(os.open(pending, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        pane = ctx.tmux.new_session_started(
            name, pane_command.launcher(sys.executable, hint.fp, str(spec)), opts.workspaces[0],
            pane_command.pane_options(sid, hint.fp, hint.shown, opts.provider),
            pane_command.session_options(sys.executable, sid, hint.fp), pane_command.session_hooks(sid, hint.mode))
    except Exception:  # noqa: BLE001 - the start without it reports whatever this was
        if pending is not None:
            _unlink(pending)
        return None
    return Early(name, sid, hint, spec, status, pending, pane)


def fits(early: Early, fp: str, shown: str, mode: str) -> bool:
    """The request resolved to exactly what the early pane was opened with."""
    return (early.hint.fp, early.hint.shown, early.hint.mode) == (fp, shown, mode)


def abandon(ctx: Context, early: Early) -> None:
    """Its session goes, then its marker. In that order: a launcher told first that there is no
    spec would exit, and its pane-died hook (the audit's run-shell job) would keep the killed
    window alive in the server a moment longer, where tmux then looks for a client's "current"
    pane (send-keys to the next session of that name failed with "no current client")."""
    try:
        early.pane()
    except Exception:  # noqa: BLE001 - no session was made: nothing to kill
        _unlink(early.pending)
        return
    ctx.tmux.run("kill-session", "-t", f"={early.name}", check=False)
    _unlink(early.pending)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
