"""`tmuxjail stop`: kill a session's tmux session (or, placed in someone else's, its own panes);
the record stays, with its last audit.

The use case; its command-line handler is commands/stop.py."""

from __future__ import annotations

from .. import audit, conversation, log
from ..adapters import get as get_adapter
from ..context import Context, where_it_runs
from ..errors import TmuxjailError, UsageError
from ..net import proxy as netproxy
from ..pane.command import kind
from ..status import describe, placement, under
from ..tmux import check_name


def kill_placed(tmux, row) -> None:
    """Stop a jail that lives in someone else's session: its own panes only."""
    for p in tmux.panes():
        if p.tmuxjail_id == row.id and kind(p.start_command, row.fingerprint):
            tmux.run("kill-pane", "-t", p.pane_id, check=False)


def learn_conversation(ctx: Context, row) -> None:
    conv = get_adapter(row.provider).conversation
    if conv is None or row.native_id:
        return
    mine = [p for p in ctx.tmux.panes() if p.tmuxjail_id == row.id and kind(p.start_command, row.fingerprint)]
    conversation.learn(ctx, row, conv, mine[0] if mine else None)


def stop(ctx: Context, name: str) -> dict:
    check_name(name)
    store = ctx.store
    row = store.find(name)
    if row is None:
        raise UsageError(f"no live session named {name!r}", hint="see: tmuxjail list")
    if row.status == "stopped":  # never a hint back to resume's "stop it" (28.3)
        raise UsageError(f"{name} is stopped already", hint=f"bring it back with `tmuxjail resume {name}`")
    ctx = where_it_runs(ctx, row, "stop")
    learn_conversation(ctx, row)  # while its CLI still runs: the one moment its open file says it
    if placement(row) != "session":  # a window or split in someone else's session
        kill_placed(ctx.tmux, row)
    elif ctx.tmux.has_session(row.tmux_session):
        panes = [p for p in ctx.tmux.panes() if p.session_name == row.tmux_session]
        if panes and panes[0].tmuxjail_id != row.id:
            raise UsageError(f"tmux session {row.tmux_session!r} is not this tmuxjail session; not killing it")
        ctx.tmux.kill_session(row.tmux_session)
    # Its proxies exit with their panes and take their sockets along; one that was killed leaves
    # its socket behind in state/net/<id>/: removed here once that proxy is gone.
    netproxy.clear_stale(netproxy.session_dir(str(ctx.paths.store), row.id), wait=2.0)
    store.update_session(row.id, status="stopped")
    store.event("stop", row.id)
    audit.run(store, row)  # the session's last word: list --all and show keep it
    log.info("stop", session=name)
    return describe(ctx, store.find(name))


def stop_all(ctx: Context, workspace: str | None) -> dict:
    """Every live session (of that workspace, or under it); one that cannot be stopped is
    reported and the others are still stopped."""
    done, failed = [], []
    for row in ctx.readonly_store().sessions():
        if workspace is not None and not under(row.workspace, workspace):
            continue
        try:
            done.append(stop(ctx, row.id))
        except TmuxjailError as exc:
            failed.append({"name": row.name, "error": exc.message, "hint": exc.hint})
    return {"stopped": done, "failed": failed}

