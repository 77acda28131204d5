"""`tmuxjail show`: a session and its recorded policy, in full."""

from __future__ import annotations

import sqlite3

from .. import config, profiles
from ..adapters import get as get_adapter
from ..audit import clean, latest, line
from ..context import Context, where_it_runs
from ..errors import TmuxjailError, UsageError
from ..net import log as netlog
from ..render import Result, policy_text, session_text
from ..sessions.stop import learn_conversation
from ..status import describe
from ..tmux import check_name
from . import Call
from .table import JSON, NAME, Arg, declares


def show(ctx: Context, name: str) -> dict:
    check_name(name)
    row = ctx.readonly_store().find(name)
    if row is None:
        raise UsageError(f"no session named {name!r}", hint="see: tmuxjail list --all")
    if row.status != "stopped" and not row.native_id and get_adapter(row.provider).conversation is not None:
        try:  # learned while its CLI runs (the file it holds open); show never fails on it
            learn_conversation(where_it_runs(ctx, row, "show"), row)
            row = ctx.store.find(name) or row
        except (TmuxjailError, OSError, sqlite3.Error):
            pass  # a store we may not write, a server that does not answer: shown as recorded
    out = describe(ctx, row)
    pol = out["policy"] = row.policy_data
    out["request"] = row.request_data
    if pol:
        labels = {}
        try:
            labels = {c: cap.label for c, cap in profiles.load(row.provider).capabilities.items()}
        except TmuxjailError:
            pass  # the profile is gone or broken today: still show what was recorded
        out["identity"] = pol["executable"]
        out["profile"] = {"provider": pol["provider"], "version": pol["profile_version"], "hash": pol["profile_hash"]}
        out["capabilities"] = [{"id": c, "label": labels.get(c)} for c in pol["capabilities"]]
    approvals = {a["id"]: a for a in ctx.readonly_store().approvals(row.provider, include_revoked=True)}
    out["approval"] = approvals.get(row.approval_id)
    out["audit"] = latest(ctx.readonly_store(), {row.id}).get(row.id)
    return out


@declares("tmuxjail show app --json",
          NAME, JSON, Arg("--network", action="store_true", help="the destinations its egress proxy allowed and denied"))
def run(call: Call) -> Result:
    d = show(call.ctx, call.args.name)
    if call.args.network:
        rep = netlog.report(d, str(call.ctx.paths.store), _ceiling(call.ctx, d), str(call.ctx.paths.config_file))
        return Result(rep, netlog.text(rep))
    return Result(d, "\n".join([session_text(d, clean, line), "policy:", policy_text(d["policy"] or {})]))


def _ceiling(ctx: Context, d: dict) -> tuple[str, ...] | None:
    """Today's operator ceiling on the domains of the session's mode (None: the config is broken)."""
    try:
        return config.load(ctx.paths.config_file).allow_domains.get(d.get("mode") or "", None)
    except TmuxjailError:
        return None
