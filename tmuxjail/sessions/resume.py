"""`tmuxjail resume`: reattach a live session, or relaunch the CLI's own resume in the same jail;
refused (exit 3) when today's policy is not the recorded one.

The use case; its command-line handler is commands/resume.py."""

from __future__ import annotations

import json
from collections.abc import Callable

from .. import config, conversation, jail, log, plan
from ..adapters import get as get_adapter
from ..context import Context, where_it_runs
from ..effective import Policy
from ..errors import ResumeRefused, TmuxjailError, UsageError
from ..model import Mode
from ..net import policy as netpolicy
from ..status import describe, is_jail_pane, placement
from ..tmux import check_name
from .stop import kill_placed


def cli_argv_from_policy(pol: Policy) -> list[str]:
    exe = pol.executable
    interp = [p for p, _ in exe.extra]
    return [*interp[:1], exe.path]


def resume(ctx: Context, name: str, detach: bool = False, accept_changes: bool = False,
           ask: Callable[[str], bool] | None = None) -> dict:
    """ask: how to confirm that --accept-changes ends a running CLI (None: the caller decided)."""
    check_name(name)
    store = ctx.store
    row = store.find(name)
    if row is None:
        raise UsageError(f"no session named {name!r}", hint="see: tmuxjail list --all")
    if not row.fingerprint or not row.policy:
        raise plan.refuse(row, ["tampered"], f"{name} has no recorded fingerprint; refusing to resume it",
                          "start a new session")
    ctx = where_it_runs(ctx, row, "resume")
    jailed = jail_panes(ctx, row)
    live = [p for p in jailed if p.pane_dead != "1"]
    try:
        got = plan.may_run(ctx, row, approve=not live)  # a live CLI is only reattached: nothing is launched
    except ResumeRefused as exc:
        if live and not accept_changes:  # today's config cannot be read: reattaching launches nothing
            return _reattach(ctx, row, detach, exc.data.get("reasons") or ["config"])
        raise
    fp, pol, reasons = got.fingerprint, got.policy, got.reasons
    if fp != row.fingerprint and accept_changes and reasons and "tampered" not in reasons and pol is not None:
        return _accept_changes(ctx, row, fp, pol, reasons, detach, bool(live), ask)
    if live:
        # Nothing is launched: the running CLI keeps the policy it started with. Only a relaunch
        # is refused after a change (28.12); the result says so.
        return _reattach(ctx, row, detach, (reasons or ["tampered"]) if fp != row.fingerprint else [])
    if fp != row.fingerprint:
        reasons = reasons or ["tampered"]
        store.event("resume-refused", row.id, reasons=reasons, old=row.fingerprint, new=fp)
        log.warning("resume_refused", session=name, reasons=reasons)
        hint = f"inspect with `tmuxjail show {name}`, then start a new session"
        if "network" in reasons:
            hint = _network_hint(ctx, row, pol)
        elif "provider-state" in reasons:
            hint = (f"verified jails now keep the CLI's command files in its state read-only or as a private "
                    f"copy (docs/provider-state.md): `tmuxjail resume {name} --accept-changes` moves it to "
                    "that policy; or start a new session")
        elif "limits" in reasons:
            hint = (f"the jail's limits differ today: the config's [limits], your own per-user limits (ulimit), "
                    f"or a session from before jails got a share of them (docs/resources.md); "
                    f"`tmuxjail resume {name} --accept-changes` runs it under today's, or start a new session")
        refused = got.refusal(row, "resume", hint)
        assert refused is not None  # the policy changed
        raise refused
    if got.unapproved is not None:  # the same policy, no longer approved
        raise got.unapproved
    assert pol is not None  # the recorded fingerprint comes with a policy
    # The pane is gone or dead: relaunch the CLI's own resume, in the same jail.
    adapter = get_adapter(row.provider)
    r = row.start_request
    native_id = conversation.learn(ctx, row, adapter.conversation, jailed[0] if jailed else None)
    exe = adapter.cli_exe(cli_argv_from_policy(pol), pol)
    ws = r.workspaces[0]
    rel = adapter.conversation_file(ws, native_id) if native_id else None
    began = not (rel and conversation.never_began(row.private_home or pol.home, rel))
    if began:
        cli_argv = adapter.backend_resume_argv(pol.backend, exe, native_id, list(r.args), pol.home, ws)
    else:  # its id was given up front and no conversation began: the same id, new (resuming it fails)
        cli_argv = adapter.start_argv(exe, native_id, list(adapter.seatbelt_args if pol.backend == "seatbelt" else ()),
                                      pol.home, ws)
    spec = jail.stage(ctx, row.id, fp, pol, adapter, jail.build(ctx, pol, cli_argv))
    with jail.spec_discarded_on_failure(spec):
        options = jail.options(row.id, pol, fp, r.worktree)
        argv = jail.pane_argv(fp, spec.path)
        if row.status == "stopped":
            # Before the pane exists: its launcher refuses a session the store still calls stopped.
            store.update_session(row.id, status="starting")
        try:
            pane = _relaunch(ctx, row, jailed, argv, options, pol, fp, detach)
        except BaseException:
            if row.status == "stopped":
                store.update_session(row.id, status="stopped")
            raise
        store.update_session(row.id, tmux_pane=pane, tmux_socket=ctx.tmux.refresh_socket(), status="starting")
        result = jail.settle(ctx, row.id, row.name, pane, spec, "resume", pol, fp, detach)
        if (not native_id or not began) and row.provider != "shell":
            result["conversation"] = "new"  # none of its own was recorded: never another's
        return result


def jail_panes(ctx: Context, row) -> list:
    """The session's jailed panes on its server; refused (tampered) when its tmux session holds
    panes that are not this jail's, or a pane's fingerprint is not the store's."""
    panes = [p for p in ctx.tmux.panes() if p.session_name == row.tmux_session]
    if placement(row) != "session":  # a window or split in someone else's session: its own panes only
        panes = [p for p in panes if p.tmuxjail_id == row.id]
    jailed = [p for p in panes if is_jail_pane(p, row)]
    # A stopped session cannot be stopped again: its hint never sends the user to `stop` (28.3).
    fix = (f"start a new session (`tmuxjail list --all` shows {row.name})" if row.status == "stopped"
           else f"stop it with `tmuxjail stop {row.name}` and start a new one")
    if panes and not jailed:
        raise plan.refuse(row, ["tampered"], f"{row.name}: the tmux session has no pane with this jail's fingerprint",
                          fix)
    for p in jailed:
        if ctx.tmux.pane_option(p.pane_id, "@tmuxjail_fp") != row.fingerprint:
            raise plan.refuse(row, ["tampered"], f"{row.name}: the pane's @tmuxjail_fp does not match the store", fix)
    return jailed


def _reattach(ctx: Context, row, detach: bool, changed: list[str]) -> dict:
    ctx.store.event("reattach", row.id, fingerprint=row.fingerprint, **({"changed": changed} if changed else {}))
    result = describe(ctx, row)
    result["attach"] = None if detach else ctx.tmux.attach_argv(row.tmux_session)
    if changed:
        result["policy_changed"] = changed
    return result


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
        domains = netpolicy.declared(plan.profile_for(ctx, row.provider, row.start_request.candidate), caps) \
            if row.mode == Mode.verified else ()
        steps = config.restore_network(row.mode, old, row.request_data or {}, cfg, str(ctx.paths.config_file), domains)
    except (TmuxjailError, KeyError):
        steps = None
    if not steps:
        return f"it ran with {what}; {now}: {move}"
    return f"it ran with {what}; {now}: to resume it as it was, {'; and '.join(steps)}; or {move}"


def _relaunch(ctx: Context, row, jailed: list, argv: list[str], options, pol: Policy, fp: str,
              detach: bool) -> str:
    """The new pane: respawned in place of the dead one, or in a new tmux session."""
    ws = row.start_request.workspaces[0]
    if jailed:
        ctx.tmux.respawn(jailed[0].pane_id, argv, ws, options)
        return str(jailed[0].pane_id)
    if placement(row) != "session":
        # A stopped --here/--split jail: a new window of the session it came from, while it exists;
        # else a session of its own, named after it.
        if ctx.tmux.has_session(row.tmux_session):
            return str(ctx.tmux.new_pane("window", f"={row.tmux_session}:", argv, ws, options,
                                         detach=detach))
        if ctx.tmux.has_session(row.name):
            raise UsageError(f"{row.name}: the tmux session it came from ({row.tmux_session!r}) is gone, and a tmux "
                             f"session named {row.name!r} already exists", hint=f"tmux kill-session -t ={row.name}, "
                             f"or start a new session")
        ctx.store.update_session(row.id, tmux_session=row.name)
        row = row._replace(tmux_session=row.name)
    return str(ctx.tmux.new_session(row.tmux_session, argv, ws, options,
                                    session_options=jail.session_options(row.id, fp),
                                    hooks=jail.session_hooks(row.id, pol)))


def _accept_changes(ctx: Context, row, fp: str, pol: Policy, reasons: list[str], detach: bool, live: bool,
                    ask: Callable[[str], bool] | None) -> dict:
    """Move a session to today's policy: only once a human approved it (verified mode), and
    recorded as an event linking the old fingerprint to the new one. The CLI is relaunched under
    the new policy; nothing keeps running under the old one: a running CLI is ended, which ask
    (the CLI's confirmation; None: the caller has decided) must agree to first."""
    what = (f"This ends the CLI running in {row.name} and relaunches it under today's policy" if live
            else f"This relaunches {row.name} under today's policy")
    if ask is not None and not ask(f"{what} ({', '.join(reasons)}). Continue?"):
        raise UsageError(f"{what}: not confirmed", hint=f"tmuxjail resume {row.name} --accept-changes --yes")
    approval = plan.still_approved(ctx, row, pol) if pol.mode is Mode.verified else None
    store = ctx.store
    store.event("accept-changes", row.id, old=row.fingerprint, new=fp, reasons=reasons,
                approval=approval["id"] if approval else None)
    log.info("accept_changes", session=row.name, old=row.fingerprint, new=fp, reasons=reasons)
    if placement(row) != "session":  # its own panes, never the session it was placed in
        kill_placed(ctx.tmux, row)
    elif ctx.tmux.has_session(row.tmux_session):  # ctx is the session's own server (resume)
        ctx.tmux.kill_session(row.tmux_session)
    store.update_session(row.id, fingerprint=fp, policy=json.dumps(pol.to_data(), sort_keys=True),
                         approval_id=approval["id"] if approval else row.approval_id)
    return resume(ctx, row.name, detach=detach)

