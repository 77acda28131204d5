"""The command-line side of `tmuxjail shell`: the use case is sessions/shell.py."""

from __future__ import annotations

from .. import log
from ..errors import refuse_inside_jail
from ..render import Result
from ..sessions.shell import shell
from . import Call
from .table import CLIENT, DETACH, JSON, NAME, declares


@declares("tmuxjail shell app", NAME, DETACH, CLIENT.but(help="tmux client to switch to the new window"), JSON)
def run(call: Call) -> Result:
    refuse_inside_jail(call.ctx.env, "shell")
    a, ctx = call.args, call.ctx
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    result = shell(ctx, a.name, detach=a.detach or bool(a.client))
    text = None if a.client else f"shell in {result['name']} ({result['mode']}): {result['shell_pane']}"
    return Result(result, text, bring=result, target=result["shell_pane"])

