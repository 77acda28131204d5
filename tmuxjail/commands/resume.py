"""`tmuxjail resume`: reattach a live session, or relaunch the CLI's own resume in the same jail;
refused (exit 3) when today's policy is not the recorded one."""

from __future__ import annotations

import json

from .. import config, jail, log, netpolicy, plan
from ..adapters import get as get_adapter
from ..context import Context, where_it_runs
from ..errors import TmuxjailError, UsageError
from ..model import Mode, Policy
from ..policy import as_data
from ..render import Result, confirm
from ..status import describe, is_jail_pane
from ..tmux import check_name
from . import Call


def cli_argv_from_policy(pol: Policy) -> list[str]:
    exe = pol.executable
    interp = [p for p, _ in exe.extra]
    return [*interp[:1], exe.path]


def resume(ctx: Context, name: str, detach: bool = False, accept_changes: bool = False) -> dict:
    check_name(name)
    store = ctx.store
    row = store.find(name)
    if row is None:
        raise UsageError(f"no session named {name!r}", hint="see: tmuxjail list --all")
    if not row.fingerprint or not row.policy:
        raise plan.refuse(row, ["tampered"], f"{name} has no recorded fingerprint; refusing to resume it",
                          "start a new session")
    ctx = where_it_runs(ctx, row, "resume")
    got = plan.recompute(ctx, row)
    fp, pol, reasons = got.fingerprint, got.policy, got.reasons
    if fp != row.fingerprint and accept_changes and reasons and "tampered" not in reasons and pol is not None:
        return _accept_changes(ctx, row, fp, pol, reasons, detach)
    if fp == row.fingerprint and pol is not None and pol.mode is Mode.verified:
        plan.still_approved(ctx, row, pol)
    if fp != row.fingerprint:
        reasons = reasons or ["tampered"]
        store.event("resume-refused", row.id, reasons=reasons, old=row.fingerprint, new=fp)
        log.warning("resume_refused", session=name, reasons=reasons)
        hint = f"inspect with `tmuxjail show {name}`, then start a new session"
        if "network" in reasons:
            hint = _network_hint(ctx, row, pol)
        raise plan.refuse(row, reasons,
                          f"{name}: the policy changed since the session started ({', '.join(reasons)}); refusing to resume",
                          hint)
    assert pol is not None  # the recorded fingerprint comes with a policy
    panes = [p for p in ctx.tmux.panes() if p.session_name == row.tmux_session]
    jailed = [p for p in panes if is_jail_pane(p, row)]
    if panes and not jailed:
        raise plan.refuse(row, ["tampered"], f"{name}: the tmux session has no pane with this jail's fingerprint",
                          f"stop it with `tmuxjail stop {name}` and start a new one")
    for p in jailed:
        if ctx.tmux.pane_option(p.pane_id, "@tmuxjail_fp") != row.fingerprint:
            raise plan.refuse(row, ["tampered"], f"{name}: the pane's @tmuxjail_fp does not match the store",
                              f"stop it with `tmuxjail stop {name}`")
    live = [p for p in jailed if p.pane_dead != "1"]
    if live:
        store.event("reattach", row.id, fingerprint=fp)
        result = describe(ctx, row)
        result["attach"] = None if detach else ctx.tmux.attach_argv(row.tmux_session)
        return result
    # The pane is gone or dead: relaunch the CLI's own resume, in the same jail.
    adapter = get_adapter(row.provider)
    r = row.request_data
    exe = adapter.own_sandbox_off(cli_argv_from_policy(pol), pol.mode.value, pol.backend)
    cli_argv = adapter.backend_resume_argv(pol.backend, exe, row.native_id, list(r.get("args", ())))
    spec = jail.stage(ctx, row.id, fp, pol, adapter, jail.build(ctx, pol, cli_argv))
    with jail.spec_discarded_on_failure(spec):
        options = jail.options(row.id, pol, fp)
        argv = jail.pane_argv(fp, spec.path)
        if row.status == "stopped":
            # Before the pane exists: its launcher refuses a session the store still calls stopped.
            store.update_session(row.id, status="starting")
        try:
            pane = _relaunch(ctx, row, jailed, argv, options, pol, fp)
        except BaseException:
            if row.status == "stopped":
                store.update_session(row.id, status="stopped")
            raise
        store.update_session(row.id, tmux_pane=pane, tmux_socket=ctx.tmux.refresh_socket(), status="starting")
        return jail.settle(ctx, row.id, row.tmux_session, pane, spec, "resume", pol, fp, detach)


def _network_hint(ctx: Context, row, pol: Policy | None) -> str:
    """What to do when the network changed (issue 28.4: every hint one that works): the exact
    config changes that give the session its recorded network back, checked by computing its
    allow list as this resume would; or moving it to today's network."""
    old = row.policy_data or {}
    what = f"network {old.get('network', 'host')}" + (
        f" (domains {' '.join(old.get('allow_domains', ())) or 'none'})" if old.get("network") == "proxy" else "")
    now = (f"today it would get network {pol.network}" + (f" (domains {' '.join(pol.allow_domains) or 'none'})"
                                                            if pol.network == "proxy" else "")
           if pol is not None else "today's config refuses it")
    move = f"run it under today's with `tmuxjail resume {row.name} --accept-changes`" if pol else \
        "start a new session"
    try:
        cfg = config.load(ctx.paths.config_file, env_network_applies=False)
        caps = tuple(old.get("capabilities", ()))
        domains = netpolicy.declared(plan.profile_for(ctx, row.provider, row.request_data.get("candidate")), caps) \
            if row.mode == "verified" else ()
        steps = config.restore_network(row.mode, old, row.request_data or {}, cfg, str(ctx.paths.config_file), domains)
    except (TmuxjailError, KeyError):
        steps = None
    if not steps:
        return f"it ran with {what}; {now}: {move}"
    return f"it ran with {what}; {now}: to resume it as it was, {'; and '.join(steps)}; or {move}"


def _relaunch(ctx: Context, row, jailed: list, argv: list[str], options, pol: Policy, fp: str) -> str:
    """The new pane: respawned in place of the dead one, or in a new tmux session."""
    r = row.request_data
    if jailed:
        ctx.tmux.respawn(jailed[0].pane_id, argv, r["workspaces"][0], options)
        return str(jailed[0].pane_id)
    return str(ctx.tmux.new_session(row.tmux_session, argv, r["workspaces"][0], options,
                                    session_options=jail.session_options(row.id, fp),
                                    hooks=jail.session_hooks(row.id, pol)))


def _accept_changes(ctx: Context, row, fp: str, pol: Policy, reasons: list[str], detach: bool) -> dict:
    """Move a session to today's policy: only once a human approved it (verified mode), and
    recorded as an event linking the old fingerprint to the new one. The CLI is relaunched under
    the new policy; nothing keeps running under the old one."""
    approval = plan.still_approved(ctx, row, pol) if pol.mode is Mode.verified else None
    store = ctx.store
    store.event("accept-changes", row.id, old=row.fingerprint, new=fp, reasons=reasons,
                approval=approval["id"] if approval else None)
    log.info("accept_changes", session=row.name, old=row.fingerprint, new=fp, reasons=reasons)
    if ctx.tmux.has_session(row.tmux_session):  # ctx is the session's own server (resume)
        ctx.tmux.kill_session(row.tmux_session)
    store.update_session(row.id, fingerprint=fp, policy=json.dumps(as_data(pol), sort_keys=True),
                         approval_id=approval["id"] if approval else row.approval_id)
    return resume(ctx, row.name, detach=detach)


def run(call: Call) -> Result:
    a, ctx = call.args, call.ctx
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    if a.accept_changes and not confirm(f"Move {a.name} to today's policy and relaunch it?"):
        raise UsageError("--accept-changes asks on a terminal only, and was not confirmed")
    result = resume(ctx, a.name, detach=a.detach, accept_changes=a.accept_changes)
    return Result(result, None if a.client else f"resumed {result['name']} ({result['mode']})", bring=result)
