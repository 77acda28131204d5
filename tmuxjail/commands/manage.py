"""`tmuxjail attach` (reattach a live session; nothing is launched) and `tmuxjail rename`."""

from __future__ import annotations

from .. import log
from ..context import Context, where_it_runs
from ..errors import ResumeRefused, UsageError
from ..render import Result
from ..status import describe, placement
from ..tmux import check_name
from . import Call
from .table import CLIENT, JSON, NAME, Arg, declares

ATTACHABLE = ("running", "exited", "killed")  # a pane of the jail is there to look at


def attach(ctx: Context, name: str) -> dict:
    check_name(name)
    row = ctx.readonly_store().find(name)
    if row is None or row.status == "stopped":
        raise UsageError(f"no live session named {name!r}", hint="see: tmuxjail list --all")
    ctx = where_it_runs(ctx, row, "attach")
    d = describe(ctx, row)
    if d["status"] not in ATTACHABLE:
        raise ResumeRefused(f"{row.name} has no pane to attach to ({d['status']})",
                            hint=f"`tmuxjail resume {row.name}` relaunches it in the same jail")
    d["attach"] = ctx.tmux.attach_argv(row.tmux_session)
    return d


def rename(ctx: Context, old: str, new: str) -> dict:
    check_name(old)
    check_name(new)
    store = ctx.store
    row = store.find(old)
    if row is None or row.name != old:
        raise UsageError(f"no session named {old!r}", hint="see: tmuxjail list --all")
    if new == old:
        raise UsageError(f"{old!r} is already its name")
    if new in store.names():
        raise UsageError(f"a session named {new!r} already exists", hint="pick another name, or rename that one first")
    owned = placement(row) == "session" and row.status != "stopped"
    if owned:
        ctx = where_it_runs(ctx, row, "rename")
        if ctx.tmux.has_session(new):
            raise UsageError(f"tmux session {new!r} already exists on {ctx.tmux.socket}", hint="pick another name")
        if ctx.tmux.has_session(row.tmux_session):
            ctx.tmux.run("rename-session", "-t", f"={row.tmux_session}", new)
    store.update_session(row.id, name=new, **({"tmux_session": new} if owned else {}))
    store.event("rename", row.id, old=old, new=new)
    log.info("rename", session=row.id, old=old, new=new)
    return describe(ctx, store.find(row.id))


@declares("tmuxjail attach app", NAME, CLIENT, JSON)
def run_attach(call: Call) -> Result:
    d = attach(call.ctx, call.args.name)
    return Result(d, None, bring=d)


@declares("tmuxjail rename codex-app-1a2b app", NAME.but(metavar="OLD"), Arg("new", metavar="NEW"), JSON)
def run_rename(call: Call) -> Result:
    log.setup(call.ctx.paths.log_file, call.opt("verbose", False))
    d = rename(call.ctx, call.args.name, call.args.new)
    return Result(d, f"renamed {call.args.name} to {d['name']}")
