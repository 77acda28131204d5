"""`tmuxjail shell NAME`: your login shell in a new window of a session, inside the same jail.
The window runs `tmuxjail _pane` (commands/pane.py), as the session's own new windows do.

The use case; its command-line handler is commands/shell.py."""

from __future__ import annotations

from .. import jail, plan
from ..context import Context, where_it_runs
from ..errors import ResumeRefused, TmuxjailError, UsageError
from ..status import describe


def live_row(ctx: Context, name: str):
    row = ctx.store.find(name)
    if row is None or row.status == "stopped":
        raise UsageError(f"no live session named {name!r}", hint="see: tmuxjail list")
    if not row.fingerprint or not row.policy:
        raise ResumeRefused(f"{row.name} has no recorded fingerprint; refusing to open a shell in it",
                            data={"name": row.name, "reasons": ["tampered"]})
    return row


def shell(ctx: Context, name: str, detach: bool = False) -> dict:
    row = live_row(ctx, name)
    ctx = where_it_runs(ctx, row, "shell")  # its own server, whatever -L/-S/TMUX say
    if not ctx.tmux.has_session(row.tmux_session):
        raise UsageError(f"{row.name} is not running", hint=f"resume it first: tmuxjail resume {row.name}")
    pol = plan.checked(ctx, row, "open a shell in it", "shell-refused")  # refuse here, not in a dead pane
    cwd = row.start_request.workspaces[0]
    pane = ctx.tmux.new_pane("window", f"={row.tmux_session}:", jail.helper_argv(row.id, row.fingerprint), cwd,
                             {}, detach=True, window=f"{row.provider}-shell")
    failure = jail.wait_jailed(ctx.tmux, pane, jail.unguarded(pol))
    if failure:
        raise TmuxjailError(f"the shell did not start: {failure}", hint="the dead pane keeps the message")
    if not detach:
        ctx.tmux.run("select-window", "-t", pane, check=False)
    ctx.store.event("shell", row.id, fingerprint=row.fingerprint, pane=pane)
    out = describe(ctx, row)
    out.update(shell_pane=pane, attach=None if detach else ctx.tmux.attach_argv(row.tmux_session))
    return out

