"""The command-line side of `tmuxjail login` and `logout`: the use case is sessions/login.py."""

from __future__ import annotations

from .. import log
from ..render import Result
from ..sessions.login import login, logout
from . import Call
from .table import JSON, Arg, declares


@declares("tmuxjail login codex   (again once its CLI has ended: keeps the login)",
          Arg("provider", help="the CLI whose login to keep (codex, claude-code, pi)"), JSON)
def run(call: Call) -> Result:
    ctx = call.ctx
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    d = login(ctx, call.args.provider)
    if d["state"] == "started":
        text = (f"signing in to {d['provider']} in the jailed session {d['session']}: "
                f"attach with `tmuxjail attach {d['session']}`, sign in, end the CLI, then run "
                f"`tmuxjail login {d['provider']}` again to keep {', '.join(d['files'])}")
    else:
        text = (f"kept {', '.join(d['files'])} of {d['provider']} in the credentials store; strict sessions get "
                f"them with `credentials = true` under [providers.{d['provider']}] in the config")
    return Result(d, text)


@declares("tmuxjail logout codex", Arg("provider"), JSON)
def run_logout(call: Call) -> Result:
    ctx = call.ctx
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    d = logout(ctx, call.args.provider)
    return Result(d, f"removed the kept login of {d['provider']}" if d["removed"] else
                  f"no kept login of {d['provider']}")
