"""The command-line side of `tmuxjail approve`: the use case is sessions/approve.py."""

from __future__ import annotations

from .. import log
from ..adapters import get as get_adapter
from ..render import Result
from ..sessions.approve import ask_and_record
from . import Call
from .table import ALL, ALLOW_DOMAIN, CANDIDATE, CAPABILITY, JSON, Arg, declares


@declares("tmuxjail approve codex --capability git-identity",
          Arg("provider"),
          CAPABILITY.but(help="optional capability to include"),
          ALLOW_DOMAIN.but(default=[], help="a domain verified sessions may reach beyond what the capabilities "
                                            "declare (repeatable)"),
          Arg("--mcp", action="append", default=[], metavar="NAME",
              help="the config's MCP server [mcp.NAME], bound to its command's digest today (repeatable)"),
          Arg("--credentials", action="store_true",
              help="the login `tmuxjail login PROVIDER` kept (with [providers.NAME] credentials = true)"),
          Arg("--yes", action="store_true", help="do not ask (for scripts that already reviewed it)"),
          Arg("--details", action="store_true", help="also show paths, env names and hosts"),
          CANDIDATE.but(help="approve a discovery's candidate profile (shows the diff; a terminal must confirm; no --yes)"),
          JSON)
def run(call: Call) -> Result:
    a, ctx = call.args, call.ctx
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    row = ask_and_record(ctx, a.provider, a.capability, a.yes, a.details, call.json, a.allow_domain, a.mcp,
                         a.credentials)
    if row is None:
        return Result(None, None, code=1)
    return Result(row, f"approved ({row['id']})")


@declares("tmuxjail approvals --json", ALL.but(help="include revoked approvals"), JSON)
def approvals_(call: Call) -> Result:
    rows = call.ctx.readonly_store().approvals(include_revoked=call.args.all)
    lines = []
    for r in rows:
        state = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
        lines.append(f"{r['provider']:12} v{r['profile_version']}  {r['executable']['version']:12} "
                     f"{r['approved_at']} by {r['approved_by']}  {state}  {', '.join(r['capabilities'])}")
    return Result(rows, "\n".join(lines) if rows else "no approvals")


@declares("tmuxjail revoke codex", Arg("provider"), JSON)
def revoke(call: Call) -> Result:
    ctx, provider = call.ctx, call.args.provider
    log.setup(ctx.paths.log_file, call.opt("verbose", False))
    get_adapter(provider)  # unknown provider: exit 2
    n = ctx.store.revoke(provider)
    return Result({"provider": provider, "revoked": n}, f"revoked {n} approval(s) of {provider}")

