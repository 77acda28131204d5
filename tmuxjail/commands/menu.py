"""`tmuxjail menu ACTION`: the tmux side of tmux.conf.example's key table (menu.py builds it)."""

from __future__ import annotations

from .. import menu
from ..render import Result
from . import Call


def run(call: Call) -> Result:
    a = call.args
    return menu.run(call.ctx, a.action, a.client, a.pane, a.print, a.rest)
