"""The command-line side of `tmuxjail start`: the use case is sessions/start.py."""

from __future__ import annotations

import shlex
from contextlib import AbstractContextManager, nullcontext

from .. import log, restrict
from ..errors import NotApproved, UsageError, refuse_inside_jail
from ..render import Result, interactive, policy_text
from ..request import StartRequest, canonical_workspaces
from ..sessions import early
from ..sessions.place import cwd, here
from ..tmux import check_name
from . import Call
from .table import (
    CANDIDATE,
    CLIENT,
    DETACH,
    DRY_RUN,
    JSON,
    REQUEST,
    REQUEST_JAIL,
    RESTRICT,
    Arg,
    OneOf,
    declares,
)

START = (
    *REQUEST,
    Arg("--name", help="session name (default: PROVIDER-WORKSPACE-XXXX)"),
    *REQUEST_JAIL,
    DETACH,
    OneOf((Arg("--here", action="store_true", help="a new window in the current tmux session (inside tmux)"),
           Arg("--split", choices=("h", "v"), help="split the current tmux pane: h side by side, v stacked"))),
    CLIENT.but(help="tmux client to switch to the new session (key bindings pass it)"),
    Arg("--non-interactive", action="store_true", help="never prompt; fail instead"),
    DRY_RUN.but(help="print the policy, fingerprint, pane command and sandbox argv; run nothing"),
    RESTRICT,
    Arg("--backend", choices=("bwrap", "seatbelt"), default=None,
        help="with --dry-run: show what this backend would run (seatbelt = the macOS profile, auditable anywhere)"),
    CANDIDATE,
    Arg("--worktree", nargs="?", const="", default=None, metavar="NAME",
        help="strict modes: run in a new git worktree of the repository here, on a branch of its own "
             "(tmuxjail/NAME) that the agent can commit to; bring it home with `tmuxjail land` (docs/worktrees.md)"),
    Arg("--from", dest="from_ref", metavar="REF", help="with --worktree: the commit it starts from (default HEAD)"),
    JSON,
)


def options(call: Call) -> StartRequest:
    a = call.args
    if a.name is not None:
        check_name(a.name)  # before the workspaces, as always
    workspaces, worktree = tuple(a.workspace), None
    restriction = restrict.from_file(a.restrict)  # every check that can fail before a worktree is made
    if a.worktree is not None:
        worktree = new_worktree(call, a.provider, a.worktree, a.from_ref, workspaces)
        workspaces = (worktree["path"],)
    elif a.from_ref is not None:
        raise UsageError("--from goes with --worktree")
    with _kept(worktree):
        return StartRequest.build(
            cwd(call.ctx), a.provider, mode=a.mode, workspaces=workspaces, name=a.name, env_name=a.env_name,
            worktree=worktree, capabilities=tuple(a.capability), detach=a.detach, non_interactive=a.non_interactive,
            dry_run=a.dry_run, args=tuple(call.passthrough), backend=a.backend, restriction=restriction,
            network=a.network, candidate=a.candidate, allow_domains=domains(a), mcp=tuple(a.mcp))


def _kept(worktree: dict | None) -> AbstractContextManager[None]:
    """A start that does not happen leaves no worktree behind (worktree.discarded_on_failure)."""
    if worktree is None:
        return nullcontext()
    from ..worktree import discarded_on_failure

    return discarded_on_failure(worktree)


def new_worktree(call: Call, provider: str, name: str, from_ref: str | None, workspaces: tuple[str, ...]) -> dict:
    """The worktree a --worktree start runs in, made now (worktree.create)."""
    from .. import worktree  # seam: git's code loads for --worktree only

    a = call.args
    if a.dry_run:
        raise UsageError("--worktree makes a worktree: it has no dry run (try it without --worktree)")
    if len(workspaces) > 1:
        raise UsageError("--worktree takes one repository: give at most one --workspace")
    where = canonical_workspaces(workspaces, cwd(call.ctx))[0]
    return worktree.for_start(call.ctx.paths, where, provider, name or None, from_ref, a.mode)


def domains(a) -> tuple[str, ...] | None:
    return None if a.allow_domain is None else tuple(a.allow_domain)


def dry_run_text(result: dict) -> str:
    lines = [f"mode: {result['mode']}\nfingerprint: {result['fingerprint']}\npolicy:", policy_text(result["policy"]),
             "pane command:\n  " + shlex.join(result["pane_command"]),
             "sandbox argv:\n  " + shlex.join(result["sandbox_argv"])]
    if result.get("seatbelt_profile"):
        lines += ["seatbelt profile:\n" + result["seatbelt_profile"], "seatbelt parameters:",
                  "\n".join(f"  {k}={v}" for k, v in result["seatbelt_params"].items())]
    lines.append("environment names:\n  " + " ".join(result["env_names"]))
    return "\n".join(lines)


@declares("tmuxjail start codex --mode isolated --workspace ~/src/app --name app -- --model o4", *START)
def run(call: Call) -> Result:
    refuse_inside_jail(call.ctx.env, "start")
    log.setup(call.ctx.paths.log_file, call.opt("verbose", False))
    opts = options(call)
    with _kept(opts.worktree):
        return _run(call, opts)


def _run(call: Call, opts: StartRequest) -> Result:
    a, ctx = call.args, call.ctx
    place = None
    if (a.here or a.split) and not a.dry_run:
        place = here(call.tmux, ctx.env, "window" if a.here else "split", a.split)
    # A request that started before: its pane opens now, while the policy code loads and resolves.
    pane = early.spawn(ctx, opts) if place is None else None
    if not a.dry_run:
        from .. import audit  # seam: the workspace's walk for the audit starts now, on another core

        audit.snapshot_ahead(opts.workspaces)
    from ..sessions.start import start  # seam: the policy code (warm or full), after the early pane

    try:
        result = start(ctx, opts, place, pane)
    except NotApproved as exc:
        # Interactive starts may ask a human; --non-interactive and scripts never do.
        if not exc.data.get("fix") or a.non_interactive or a.dry_run or call.json or not interactive():
            raise
        print(f"tmuxjail: {exc.message}")
        # Asking a human loads the profiles and the identity code: only here.
        from ..sessions.approve import ask_and_record

        if not ask_and_record(ctx, a.provider, a.capability, False, False, False, a.allow_domain or ()):
            raise
        result = start(ctx, opts, place)
    if a.dry_run:
        return Result(result, dry_run_text(result))
    text = None if a.client else f"started {result['name']} ({result['mode']}, {result['fingerprint']})"
    return Result(result, text, bring=result)


@declares("tmuxjail preflight codex --mode verified --workspace ~/src/app --json",
          *REQUEST, *REQUEST_JAIL, RESTRICT, CANDIDATE, JSON)
def run_preflight(call: Call) -> Result:
    a = call.args
    opts = StartRequest.build(
        cwd(call.ctx), a.provider, mode=a.mode, workspaces=tuple(a.workspace), env_name=a.env_name,
        capabilities=tuple(a.capability), non_interactive=True, restriction=restrict.from_file(a.restrict),
        network=a.network, candidate=a.candidate, allow_domains=domains(a), mcp=tuple(a.mcp))
    from ..sessions.start import preflight

    result = preflight(call.ctx, opts)
    return Result(result, f"ok: {result['mode']} {result['fingerprint']}")

