"""`tmuxjail completion bash|zsh`: the script, generated from the command table's declarations."""

from __future__ import annotations

from .. import completion
from ..render import Result
from . import Call, table
from .table import Arg, declares


@declares('eval "$(tmuxjail completion bash)"', Arg("shell", choices=("bash", "zsh")))
def run(call: Call) -> Result:
    return Result(None, completion.script(call.args.shell, table))
