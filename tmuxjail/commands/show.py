"""`tmuxjail show`: a session and its recorded policy, in full."""

from __future__ import annotations

import sqlite3

from .. import config, profiles
from ..adapters import get as get_adapter
from ..audit import clean, latest, line
from ..context import Context, where_it_runs
from ..errors import TmuxjailError, UsageError
from ..net import broker
from ..net import log as netlog
from ..pane.mcp import ERR_NAME, LOG_NAME, session_dir
from ..registry import Mode
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
          NAME, JSON, Arg("--network", action="store_true", help="the destinations its egress proxy allowed and denied"),
          Arg("--mcp", action="store_true", help="its MCP servers and the tool calls its broker allowed and refused"))
def run(call: Call) -> Result:
    d = show(call.ctx, call.args.name)
    if call.args.mcp:
        rep = mcp_report(call.ctx, d)
        return Result(rep, mcp_text(rep))
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


# What each CLI obeys of MCP configuration the agent could have written, in a strict jail.
SHOWN_ERRORS = 20
AGENT_MCP = {
    "claude-code": "not obeyed (--strict-mcp-config: only tmuxjail's servers)",
    "codex": "obeyed inside the jail: servers the agent adds to the private home's config.toml run there, "
             "with the jail's limits and no secret",
    "shell": "none: the stub and its config are at /run/tmuxjail/mcp",
}


def mcp_report(ctx: Context, d: dict) -> dict:
    """The session's MCP servers (as its policy records them) and its broker's call log."""
    pol = d.get("policy") or {}
    servers = [{**{k: s.get(k) for k in ("name", "command", "sha256", "args", "env", "network", "tools")},
                "run": s.get("run", "host")} for s in pol.get("mcp", ())]
    directory = session_dir(str(ctx.paths.store), d["id"])
    calls = broker.read_log(directory + "/" + LOG_NAME)
    counts = broker.read_counts(directory + "/" + LOG_NAME)  # every call, whatever the log rotated away
    try:
        with open(directory + "/" + ERR_NAME, "rb") as f:  # what its servers said on stderr, last lines
            errors = [clean(x) for x in f.read().decode("utf-8", "replace").splitlines()[-SHOWN_ERRORS:]]
    except OSError:
        errors = []
    strict = Mode(pol["mode"]).strict if pol.get("mode") in Mode.__members__ else False
    agent = AGENT_MCP.get(d.get("provider") or "", "") if strict else "obeyed: this mode does not control MCP configuration"
    return {"name": d["name"], "servers": servers, "agent_config": agent, "calls": calls, "counts": counts,
            "errors": errors}


def mcp_text(rep: dict) -> str:
    lines = [f"{rep['name']}: MCP servers"]
    for s in rep["servers"]:
        tools = "all tools" if s["tools"] is None else "tools: " + ", ".join(s["tools"])
        where = ("in the agent's jail, its calls neither filtered nor logged" if s.get("run") == "jail"
                 else f"network {s['network']}, {tools}")
        lines.append(f"  {s['name']}: {s['command']} ({str(s['sha256'])[:19]}…), {where}")
    if not rep["servers"]:
        lines.append("  none attached")
    if rep["agent_config"]:
        lines.append(f"MCP configuration the agent can write: {rep['agent_config']}")
    lines.append("calls (count, decision, server, tool or method):" if rep["counts"] else "calls: none logged")
    # A tool name is the jail's text: quoted, with anything but printable ASCII escaped.
    lines += [f"  {c['count']:5}  {c['decision']:8} {c['server']}  {c['tool']!a}" for c in rep["counts"]]
    if rep["errors"]:
        lines += ["its servers' stderr (last lines):", *(f"  {x}" for x in rep["errors"])]
    return "\n".join(lines)
