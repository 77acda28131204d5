"""The command-line side of `tmuxjail resume`: the use case is sessions/resume.py."""

from __future__ import annotations

import sys

from .. import log
from ..errors import UsageError, refuse_inside_jail
from ..render import Result, confirm, interactive
from ..sessions.resume import resume
from . import Call
from .table import CLIENT, DETACH, JSON, NAME, Arg, declares


def _ask(question: str) -> bool:
    if not interactive():
        raise UsageError("--accept-changes asks first, and there is no terminal to ask on",
                         hint="confirm it in the command: add --yes")
    return confirm(question)


@declares("tmuxjail resume app",
          NAME, DETACH, CLIENT,
          Arg("--accept-changes", action="store_true",
              help="move the session to today's policy, ending its CLI if it runs (asks on a terminal; "
                   "verified mode needs the new approval first)"),
          Arg("--yes", action="store_true", help="with --accept-changes: do not ask (scripts)"),
          JSON)
def run(call: Call) -> Result:
    refuse_inside_jail(call.ctx.env, "resume")
    a, ctx = call.args, call.ctx
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    ask = None if a.yes else _ask
    result = resume(ctx, a.name, detach=a.detach, accept_changes=a.accept_changes, ask=ask)
    if result.get("policy_changed") == ["config"]:
        sys.stderr.write(f"tmuxjail: today's config cannot be read: reattached {result['name']}, whose CLI keeps "
                         "running under the policy it started with; fix the config (`tmuxjail doctor` shows it) "
                         "before it is relaunched\n")
    elif result.get("policy_changed"):
        sys.stderr.write(f"tmuxjail: {result['name']}'s policy changed since it started "
                         f"({', '.join(result['policy_changed'])}): reattached, its CLI keeps running under the "
                         f"policy it started with; a relaunch would be refused (`tmuxjail resume {result['name']} "
                         "--accept-changes` moves it to today's policy, ending the running CLI)\n")
    text = f"resumed {result['name']} ({result['mode']})"
    if result.get("conversation") == "new":
        text += ("; no conversation of its own was recorded (none had begun, or it could not be told from "
                 "another session's), so a new one started")
    return Result(result, None if a.client else text, bring=result)

