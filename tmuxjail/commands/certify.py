"""`tmuxjail certify PROVIDER`: run the installed CLI in real jailed panes and record the evidence."""

from __future__ import annotations

from .. import certify
from ..render import Result
from . import Call


def run(call: Call) -> Result:
    a = call.args
    rec = certify.run_certify(a.provider, tuple(a.mode), a.standin, a.output)
    return Result(rec, certify.render(rec), code=0 if rec["ok"] else 1)
