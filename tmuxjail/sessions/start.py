"""`tmuxjail start`: resolve a plan, open a pane whose process is the launcher, wait for the jail.
Also `preflight` (everything a start checks, nothing it does) and the dry run.

The use case; its command-line handler is commands/start.py."""

from __future__ import annotations

import json
import os
import re
import sys

from .. import audit, jail, stateaudit, warm
from ..canon import fingerprint
from ..context import Context
from ..effective import GIT_WRITE
from ..errors import NotApproved, UsageError
from ..host import mac_layout
from ..record import Record
from ..registry import Mode
from ..request import StartRequest
from ..tmux import DuplicateSession, check_name

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from ..plan import Plan


class Placement(Record):
    """Where a jail goes when it joins the current tmux session (`--here`, `--split`)."""

    kind: str  # "window" or "split"
    split: str  # "h" or "v"
    target: str  # the window (new-window) or pane (split-window)
    session: str


def here(tmux, env: dict, how: str, split: str | None = None) -> Placement:
    pane = env.get("TMUX_PANE", "")
    if not tmux.inside or not pane:
        raise UsageError(f"--{'here' if how == 'window' else 'split'} works only inside tmux",
                         hint="run it from a tmux pane, or leave it out to start a new session")
    if tmux.inside.split(",")[0] != tmux.socket:
        raise UsageError("--here/--split need the tmux server you are in; drop -L/-S")
    session = tmux.pane_option(pane, "session_name")
    if not session:
        raise UsageError(f"tmux pane {pane} is gone")
    # new-window takes a window; split-window the pane itself.
    target = tmux.pane_option(pane, "window_id") if how == "window" else pane
    return Placement(how, split or "v", target, session)


def auto_name(provider: str, workspace: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", os.path.basename(workspace)).strip("-_")[:30] or "ws"
    while True:
        name = f"{provider}-{base}-{os.urandom(2).hex()}"
        if name not in taken:
            return name


def duplicate(name: str) -> UsageError:
    return UsageError(f"a tmux session named {name!r} already exists on this server")


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
    exe = adapter.own_sandbox_off(p.resolved.argv, pol.mode, pol.backend)
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


def start(ctx: Context, opts: StartRequest, place: Placement | None = None) -> dict:
    """opts: built (StartRequest.build: its workspaces canonical). place: where --here / --split
    put the jail (it joins the current session); else tmuxjail creates and owns a session, whose
    default-command opens new panes in the same jail."""
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
    exe = adapter.own_sandbox_off(p.argv, pol.mode, pol.backend)
    own_args = list(adapter.seatbelt_args) if pol.backend == jail.SEATBELT else []
    cli_argv = adapter.start_argv(exe, native_id, [*own_args, *opts.args], pol.home, workspaces[0])
    launch = jail.build(ctx, pol, cli_argv)

    ctx.tmux.require()
    warn_git_write(pol)
    store = ctx.store
    name = opts.name or auto_name(opts.provider, workspaces[0], store.names(include_stopped=True))
    old = store.find(name) if opts.name else None
    if old is not None and old.status == "stopped":  # never two records of one name (28.19)
        raise UsageError(f"a stopped session named {name!r} exists (its record and last audit are kept)",
                         hint=f"bring it back with `tmuxjail resume {name}`, or pick another --name "
                              "(`tmuxjail prune` forgets stopped sessions)")
    # A tmux session of that name is refused by new-session itself (one tmux run less before
    # the pane): the row made meanwhile is then forgotten (DuplicateSession below).
    data = pol.to_data()
    stored = opts._replace(mode=pol.mode.value, placement=place.kind if place is not None else None)
    try:
        row = store.insert_session(
            name=name, provider=opts.provider, mode=jail.display_mode(pol), env_name=opts.env_name,
            workspace=workspaces[0], fingerprint=fp, policy=json.dumps(data, sort_keys=True),
            request=stored.to_json(), status="starting", native_id=native_id,
            private_home=pol.private_home, tmux_socket=ctx.tmux.socket,
            tmux_session=place.session if place else name, approval_id=p.approval["id"] if p.approval else None,
        )
    except UsageError:
        if place is None and ctx.tmux.has_session(name):  # both: the tmux session is named first
            raise duplicate(name) from None
        raise
    spec = None
    try:
        jail.prepare_dirs(ctx, pol, adapter)
        audit.baseline(store, row.id, workspaces)  # before the jail can change anything
        stateaudit.baseline(store, row.id, data)  # and the CLI's own state it could (verified)
        spec = jail.write_spec(ctx, row.id, fp, pol, launch, trace=opts.trace)
        argv, options = jail.pane_argv(fp, spec.path), jail.options(row.id, pol, fp)
        if place is not None:
            pane = ctx.tmux.new_pane(place.kind, place.target, argv, workspaces[0], options,
                                     detach=opts.detach, split=place.split, window=opts.provider)
        else:
            pane = ctx.tmux.new_session(name, argv, workspaces[0], options,
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
    # Where the server really put its socket (tmux falls back from a TMUX_TMPDIR it cannot use).
    store.update_session(row.id, tmux_pane=pane, tmux_socket=ctx.tmux.refresh_socket())
    # Placed in the current session, the new window or split is already in front of the user.
    with jail.spec_discarded_on_failure(spec):
        return jail.settle(ctx, row.id, name, pane, spec, "start", pol, fp, opts.detach or place is not None)


def cwd(ctx: Context) -> str:
    """Where relative workspaces start from (the shell's $PWD, which keeps its symlinks)."""
    return ctx.env.get("PWD") or os.getcwd()


def preflight(ctx: Context, opts: StartRequest) -> dict:
    """Everything a start checks, and nothing it does: never prompts, never launches (resolved in
    full, never from the cache)."""
    from .. import plan

    workspaces = opts.workspaces
    p: Plan = plan.resolve(ctx, opts)
    return {"ok": True, "provider": opts.provider, "mode": p.policy.mode.value, "fingerprint": p.fingerprint,
            "workspace": workspaces[0], "capabilities": list(p.policy.capabilities),
            "approval": p.approval["id"] if p.approval else None}

