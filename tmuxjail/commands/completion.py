"""`tmuxjail completion bash|zsh`: the script, generated from the parser."""

from __future__ import annotations

from .. import completion
from ..render import Result
from . import Call


def run(call: Call) -> Result:
    return Result(None, completion.script(call.args.shell, call.parser))
