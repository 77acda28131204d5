"""`tmuxjail discover ...` and `tmuxjail approve --candidate` (issue 16; the discovery run's
use cases are commands/discovery.py). Each returns a
render.Result: its data for --json, its text otherwise; only a candidate's preview is printed here,
before the question."""

from __future__ import annotations

import sys

from .. import log
from ..adapters import get
from ..errors import UsageError
from ..render import Result
from ..sessions.approve import record
from . import Call
from . import discovery as r
from .table import ENV, JSON, WORKSPACE, Arg, declares

DISCOVER = (
    Arg("target", metavar="PROVIDER|show|replay|list"),
    Arg("id", nargs="?", metavar="ID", help="for show and replay: the discovery's id"),
    WORKSPACE.but(help="writable workspace (repeatable; the first is the cwd; default: .)"),
    ENV.but(help="private-home environment of the observed isolated jail (default: default)"),
    Arg("--non-interactive", action="store_true",
        help="do not attach: run the step detached until it exits or --timeout; never prompts"),
    Arg("--timeout", type=float, default=None, metavar="SECONDS",
        help="with --non-interactive: stop the step after this long (default: 600)"),
    JSON.but(help="print JSON (a new discovery: its id)"),
)


@declares("tmuxjail discover codex --workspace ~/src/app\n"
          "  tmuxjail discover codex --non-interactive --timeout 60 -- exec \"run the tests\"\n"
          "  tmuxjail discover show codex-app-1 --json\n  tmuxjail discover replay codex-app-1", *DISCOVER)
def run(call: Call) -> Result:
    log.setup(call.ctx.paths.log_file, call.opt("verbose", False))
    return _discover(call.ctx, call.args, call.passthrough)


def approve_candidate(call: Call) -> Result:
    log.setup(call.ctx.paths.log_file, call.opt("verbose", False))
    return _approve_candidate(call.ctx, call.args, call.json)


ACTIONS = ("show", "replay", "list")


def _discover(ctx, args, passthrough: list[str]) -> Result:
    target = args.target
    if target == "list":
        rows = r.listing(ctx)
        return Result(rows, "\n".join(map(_line, rows)) if rows else "no discoveries")
    if target in ("show", "replay") and not args.id:
        raise UsageError(f"discover {target} needs an ID", hint="see: tmuxjail discover list")
    if target == "show":
        d = r.show(ctx, args.id)
        return Result(d, r.render(d))
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if target == "replay":
        m = r.replay(ctx, args.id, args.timeout)
        return _observe(ctx, r, m)
    if args.id:
        raise UsageError(f"unexpected {args.id!r}: pass the CLI's arguments after --",
                         hint="tmuxjail discover codex --non-interactive -- exec \"run the tests\"")
    get(target)  # an unknown provider: exit 2 before anything starts
    if not args.non_interactive and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("discover attaches your terminal to the observed pane; without a terminal, "
                         "use --non-interactive (and --timeout)")
    m = r.start(ctx, target, tuple(args.workspace), passthrough, args.non_interactive, args.timeout, args.env_name)
    return _observe(ctx, r, m)


def _line(x: dict) -> str:
    state = "finished" if x["finished"] else "running or unfinished"
    kind = f"replay of {x['replay_of']}" if x["replay_of"] else x["mode"]
    return f"{x['id']:32} {x['provider']:12} {kind:24} {x['started_at']}  {state}"


def _observe(ctx, r, m: dict) -> Result:
    if m["non_interactive"]:
        done = r.wait(ctx, m, m["timeout"] or r.TIMEOUT)
        r.finish(ctx, m["id"], timed_out=not done)
    elif r.attach_and_wait(ctx, m):
        r.finish(ctx, m["id"])
    else:
        return Result({"id": m["id"], "finished": False, "session": m["session"]},
                      f"discovery {m['id']} still runs in tmux session {m['session']}; when the CLI has exited: "
                      f"tmuxjail discover show {m['id']}")
    d = r.show(ctx, m["id"])
    return Result({"id": m["id"], "finished": True, "evidence": d["evidence_file"], "candidate": d.get("candidate"),
                   "replay_of": d.get("replay_of"), "proposed_changes": d.get("proposed_changes")}, r.render(d))


def _approve_candidate(ctx, args, json_out: bool) -> Result:
    """Shows the diff in human words; records the approval only after a yes typed on a terminal."""
    if args.yes:
        raise UsageError("approve --candidate takes no --yes: a discovered candidate is approved only by a human "
                         "who reads it on a terminal")
    if args.capability:
        raise UsageError("approve --candidate takes no --capability: the candidate lists its capabilities")
    color = sys.stdout.isatty() and not json_out
    plan = r.approve_preview(ctx, args.provider, args.candidate, args.details, color)
    out = sys.stderr if json_out else sys.stdout
    print("This approval lets verified-mode sessions that name this candidate use:", file=out)
    print("\n".join(plan["text"]), file=out)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("approving a discovered candidate needs a human at a terminal to confirm")
    if not r.confirm_on_terminal("Approve this candidate?"):
        print("not approved", file=out)
        return Result(None, None, code=1)
    row = record(ctx, plan)
    use = f"tmuxjail start {args.provider} --mode verified --candidate {args.candidate}"
    return Result({**row, "candidate": args.candidate, "use": use},
                  f"approved ({row['id']}); use it with: {use}   (replay: tmuxjail discover replay {args.candidate})")
