"""`tmuxjail certify PROVIDER`: run the installed CLI in real jailed panes and record the evidence."""

from __future__ import annotations

from .. import certify
from ..registry import CERTIFIABLE
from ..render import Result
from . import Call
from .table import JSON, MODE, Arg, declares


@declares("tmuxjail certify codex --mode isolated --json",
          Arg("provider", choices=CERTIFIABLE),
          MODE.but(action="append", default=[], help="repeatable (default: all three)"),
          Arg("--standin", action="store_true", help="cursor: certify a stand-in that follows its documented contract"),
          Arg("--output", metavar="FILE", help="evidence JSON file (default: in the state dir, under certify/)"),
          JSON)
def run(call: Call) -> Result:
    a = call.args
    rec = certify.run_certify(a.provider, tuple(a.mode), a.standin, a.output)
    return Result(rec, certify.render(rec), code=0 if rec["ok"] else 1)
