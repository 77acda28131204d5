"""`tmuxjail audit NAME`: what a session left in its workspaces that the host would run or trust."""

from __future__ import annotations

from .. import audit
from ..errors import UsageError
from ..render import Result
from ..tmux import check_name
from . import Call
from .table import ALL, JSON, NAME, declares


@declares("tmuxjail audit app --json", NAME, ALL.but(help="everything present, not only what changed since the start"), JSON)
def run(call: Call) -> Result:
    ctx = call.ctx
    row = ctx.store.find(check_name(call.args.name))
    if row is None:
        raise UsageError(f"no session named {call.args.name!r}", hint="see: tmuxjail list --all")
    result = audit.run(ctx.store, row, show_all=call.args.all)
    return Result(result, audit.render(result), code=audit.code(result))
