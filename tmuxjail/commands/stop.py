"""The command-line side of `tmuxjail stop`: the use case is sessions/stop.py."""

from __future__ import annotations

import os

from .. import log
from ..errors import UsageError
from ..render import Result
from ..sessions.stop import stop, stop_all
from . import Call
from .table import ALL, JSON, NAME, Arg, declares


@declares("tmuxjail stop app\n  tmuxjail stop --all --workspace ~/src/app",
          NAME.but(nargs="?", help="the session (or --all)"),
          ALL.but(help="stop every live session (with --workspace: of that workspace)"),
          Arg("--workspace", metavar="DIR", help="with --all: only sessions whose workspace is DIR (or under it)"),
          JSON)
def run(call: Call) -> Result:
    ctx, a = call.ctx, call.args
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    if a.all == bool(a.name) or (a.workspace and not a.all):
        raise UsageError("name one session, or --all (with --workspace DIR for that workspace's only)",
                         hint="tmuxjail stop NAME | tmuxjail stop --all [--workspace DIR]")
    if a.all:
        got = stop_all(ctx, canonical(a.workspace) if a.workspace else None)
        text = "\n".join([f"stopped {len(got['stopped'])} session(s)",
                          *(f"  {d['name']}" for d in got["stopped"]),
                          *(f"  not stopped: {f['name']}: {f['error']}" for f in got["failed"])])
        return Result(got, text, code=1 if got["failed"] else 0)
    d = stop(ctx, a.name)
    return Result(d, f"stopped {d['name']}")


def canonical(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))

