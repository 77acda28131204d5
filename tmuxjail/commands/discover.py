"""`tmuxjail discover ...` and `tmuxjail approve --candidate` (issue 16; discover/cli.py)."""

from __future__ import annotations

from .. import log
from ..discover import cli as discover_cli
from ..render import Result
from . import Call


def run(call: Call) -> Result:
    log.setup(call.ctx.paths.log_file, call.opt("verbose", False))
    return discover_cli.run(call.ctx, call.args, call.passthrough)


def approve_candidate(call: Call) -> Result:
    log.setup(call.ctx.paths.log_file, call.opt("verbose", False))
    return discover_cli.approve_candidate(call.ctx, call.args, call.json)
