"""`tmuxjail menu ACTION`: the tmux side of tmux.conf.example's key table (menu.py builds it)."""

from __future__ import annotations

import argparse

from .. import menu
from ..render import Result
from . import Call
from .table import JSON, Arg, declares


class MenuActions(tuple):
    """The menu's actions as help, errors and completion list them; its internal ones (what menu
    items and prompts run: `menu _start|_resume|_stop ...`) are accepted but never listed."""

    def __contains__(self, word: object) -> bool:
        return word in ("_start", "_resume", "_stop") or tuple.__contains__(self, word)


@declares("tmuxjail menu start --print",
          Arg("action", choices=MenuActions(("start", "resume", "list", "shell", "policy", "stop")),
              metavar="{start,resume,list,shell,policy,stop}"),
          Arg("-c", dest="client", metavar="CLIENT", help="tmux client (bindings pass '#{client_name}')"),
          Arg("-t", dest="pane", metavar="PANE", help="tmux pane (bindings pass '#{pane_id}')"),
          Arg("--print", action="store_true", help="print the tmux command instead of running it"),
          JSON.but(help="with --print: print the command as JSON, {\"command\": [its words]}"),
          Arg("rest", nargs="*", help=argparse.SUPPRESS))  # _start PROVIDER MODE (a start-menu item)
def run(call: Call) -> Result:
    a = call.args
    return menu.run(call.ctx, a.action, a.client, a.pane, a.print, a.rest)
