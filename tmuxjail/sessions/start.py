"""`tmuxjail start`: resolve a plan, open a pane whose process is the launcher, wait for the jail.
Also `preflight` (everything a start checks, nothing it does) and the dry run.

The use case; its command-line handler is commands/start.py."""

from __future__ import annotations

import json
import os
import sys

from .. import audit, jail, log, stateaudit, warm
from ..canon import fingerprint
from ..context import Context
from ..effective import GIT_WRITE
from ..errors import NotApproved, UsageError
from ..host import mac_layout
from ..registry import Mode
from ..request import StartRequest
from ..tmux import DuplicateSession, check_name
from .early import Early, Hint, abandon, fits, write_hint
from .place import Placement, duplicate, session_name

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from ..plan import Plan


def warn_git_write(pol) -> None:
    if pol.mode.strict and GIT_WRITE in pol.capabilities:
        sys.stderr.write(f"tmuxjail: warning: {GIT_WRITE}: the agent may change .git in the workspaces; "
                         "hooks and config it writes there will run on the host at your next git command\n")
        sys.stderr.write(f"tmuxjail: warning: {GIT_WRITE}: it may also change the workspace's hook managers, "
                         ".envrc, editor and agent settings (docs/workspace-trust.md); the host runs them "
                         "at your next commit, cd or editor start\n")


def dry_run(ctx: Context, opts: StartRequest) -> dict:
    """What a start would run, resolved in full (never from the cache); shows what would need
    approving rather than refusing."""
    from .. import plan  # the full resolution: pydantic, the profiles

    workspaces = opts.workspaces
    p = plan.resolve(ctx, opts, gate=False)
    pol, fp, adapter = p.policy, p.fingerprint, p.adapter
    native_id = adapter.new_native_id()
    exe = adapter.cli_exe(p.resolved.argv, pol)
    launch = jail.build(ctx, pol, adapter.start_argv(exe, native_id, list(opts.args), pol.home, workspaces[0]))
    data = pol.to_data()
    spec = ctx.paths.spool / "<session-id>-<token>.json"
    out = {"dry_run": True, "provider": opts.provider, "mode": pol.mode.value, "fingerprint": fp,
           "policy": data, "pane_command": jail.pane_argv(fp, spec), "sandbox_argv": launch.sandbox_argv,
           "sandbox_call": launch.call.asdict() if launch.call is not None else None, "cli_argv": launch.command,
           "env_names": sorted(jail.env(ctx, pol)), "host_layout": jail.layout_data(launch.layout)}
    if pol.mode is Mode.verified:
        try:
            out["approval"] = plan.approval_for(ctx.store, plan.profile_for(ctx, opts.provider), pol)["id"]
        except NotApproved as exc:
            out["approval"], out["approval_missing"] = None, exc.data["missing"]
    if opts.backend == "seatbelt" or (pol.backend == jail.SEATBELT and opts.backend is None):
        from ..sandbox import seatbelt  # the macOS backend (on Linux: this dry run only)

        # Audit what macOS would run: the same policy, with the backend it would record.
        mac = dict(data, backend=seatbelt.Seatbelt.name)
        tty = os.ttyname(0) if os.isatty(0) else None  # a real start: the pane's, from the launcher
        # (and the session proxy's port, which a real start learns when its proxy listens)
        layout = mac_layout(mac, ctx.tmux.socket, ctx.env, tty=tty, proxy_port=seatbelt.DRY_RUN_PROXY_PORT)
        text, params = seatbelt.profile(mac, layout)
        mac_cli = p.adapter.start_argv(p.resolved.argv, native_id, [*p.adapter.seatbelt_args, *opts.args],
                                       pol.home, workspaces[0])
        out.update(policy=mac, fingerprint=fingerprint(mac),
                   sandbox_argv=seatbelt.Seatbelt().wrap(mac, mac_cli, layout), sandbox_call=None, cli_argv=mac_cli,
                   seatbelt_profile=text, seatbelt_params=params)
    return out


def start(ctx: Context, opts: StartRequest, place: Placement | None = None, early: Early | None = None) -> dict:
    """opts: built (StartRequest.build: its workspaces canonical). place: where --here / --split
    put the jail (it joins the current session); else tmuxjail creates and owns a session, whose
    default-command opens new panes in the same jail. early: that session's pane, already opened
    on the request's hint (early.py): used if the request resolves to what it was opened with,
    else killed; killed too when this start fails before the pane has its spec."""
    try:
        return _start(ctx, opts, place, early)
    except BaseException:
        if early is not None and early.pending.exists():  # its spec was never written
            abandon(ctx, early)
        raise


def _start(ctx: Context, opts: StartRequest, place: Placement | None, early: Early | None) -> dict:
    if opts.name is not None:
        check_name(opts.name)
    workspaces = opts.workspaces
    if opts.dry_run:
        return dry_run(ctx, opts)
    # The policy of an unchanged request from the cache (no pydantic), else resolved in full.
    p = warm.resolve(ctx, opts)
    pol, fp, adapter = p.policy, p.fingerprint, p.adapter
    native_id = adapter.new_native_id()
    if opts.backend == "seatbelt" and pol.backend != jail.SEATBELT:
        raise UsageError("--backend seatbelt is the macOS backend: on Linux it is accepted only with --dry-run")
    if opts.backend == "bwrap" and pol.backend == jail.SEATBELT:
        raise UsageError("--backend bwrap is the Linux backend: on macOS it is accepted only with --dry-run")
    exe = adapter.cli_exe(p.argv, pol)
    own_args = list(adapter.seatbelt_args) if pol.backend == jail.SEATBELT else []
    cli_argv = adapter.start_argv(exe, native_id, [*own_args, *opts.args], pol.home, workspaces[0])
    launch = jail.build(ctx, pol, cli_argv)
    if pol.mcp:
        jail.mcp_env(ctx, pol)  # a secret that is not set refuses now, before anything is made

    ctx.tmux.require()
    warn_git_write(pol)
    store = ctx.store
    if early is not None and not fits(early, fp, jail.display_mode(pol), pol.mode.value):
        abandon(ctx, early)
        log.info("early_pane_killed", session=early.name, hinted=early.hint.fp, resolved=fp)
        early = None
    name = early.name if early is not None else session_name(ctx, opts)
    early_pane = None
    if early is not None:
        try:
            early_pane = early.pane()
        except DuplicateSession:
            raise duplicate(name) from None
    # A tmux session of that name is refused by new-session itself (one tmux run less before
    # the pane): the row made meanwhile is then forgotten (DuplicateSession below).
    data = pol.to_data()
    stored = opts._replace(mode=pol.mode.value, placement=place.kind if place is not None else None)
    try:
        row = store.insert_session(
            id=early.sid if early is not None else None,
            name=name, provider=opts.provider, mode=jail.display_mode(pol), env_name=opts.env_name,
            workspace=workspaces[0], fingerprint=fp, policy=json.dumps(data, sort_keys=True),
            request=stored.to_json(), status="starting", native_id=native_id,
            private_home=pol.private_home, tmux_socket=ctx.tmux.socket,
            tmux_session=place.session if place else name, approval_id=p.approval["id"] if p.approval else None,
        )
    except UsageError:
        if place is None and early is None and ctx.tmux.has_session(name):  # both: the tmux session is named first
            raise duplicate(name) from None
        raise
    spec = None
    try:
        jail.prepare_dirs(ctx, pol, adapter)
        audit.baseline(store, row.id, workspaces)  # before the jail can change anything
        stateaudit.baseline(store, row.id, data)  # and the CLI's own state it could (verified)
        spec = jail.write_spec(ctx, row.id, fp, pol, launch, trace=opts.trace,
                               at=(early.spec, early.status) if early is not None else None)
        if early_pane is not None:
            os.unlink(early.pending)  # type: ignore[union-attr]  # the spec is in place: the launcher reads it
            pane = early_pane
            log.info("early_pane", session=name)
        elif place is not None:
            pane = ctx.tmux.new_pane(place.kind, place.target, jail.pane_argv(fp, spec.path), workspaces[0],
                                     jail.options(row.id, pol, fp, opts.worktree), detach=opts.detach, split=place.split,
                                     window=opts.provider)
        else:
            pane = ctx.tmux.new_session(name, jail.pane_argv(fp, spec.path), workspaces[0], jail.options(row.id, pol, fp, opts.worktree),
                                        session_options=jail.session_options(row.id, fp),
                                        hooks=jail.session_hooks(row.id, pol))
    except BaseException as exc:
        if spec is not None:
            jail.discard_spec(spec.path, spec.status)
        if isinstance(exc, DuplicateSession):  # nothing started: no row is left behind
            store.forget_session(row.id)
            raise duplicate(name) from None
        store.update_session(row.id, status="failed", failure=str(exc)[:500])
        raise
    if place is None and early_pane is None:  # an early pane used: its hint holds already
        write_hint(ctx, opts, Hint(fp, jail.display_mode(pol), pol.mode.value))
    # Where the server really put its socket (tmux falls back from a TMUX_TMPDIR it cannot use).
    store.update_session(row.id, tmux_pane=pane, tmux_socket=ctx.tmux.refresh_socket())
    # Placed in the current session, the new window or split is already in front of the user.
    with jail.spec_discarded_on_failure(spec):
        return jail.settle(ctx, row.id, name, pane, spec, "start", pol, fp, opts.detach or place is not None)


def preflight(ctx: Context, opts: StartRequest) -> dict:
    """Everything a start checks, and nothing it does: never prompts, never launches (resolved in
    full, never from the cache)."""
    from .. import plan

    workspaces = opts.workspaces
    p: Plan = plan.resolve(ctx, opts)
    return {"ok": True, "provider": opts.provider, "mode": p.policy.mode.value, "fingerprint": p.fingerprint,
            "workspace": workspaces[0], "capabilities": list(p.policy.capabilities),
            "approval": p.approval["id"] if p.approval else None}

