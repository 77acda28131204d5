"""Verified mode's approval of a provider's capabilities: preview, confirm, record (`approve`,
and a start that asks). Listing and revoking approvals are the store's, in commands/approve.py."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from .. import approvals, identity, log, profiles
from .. import config as config_mod
from ..adapters import get as get_adapter
from ..context import Context
from ..errors import UsageError
from ..net import policy as netpolicy
from ..render import confirm, interactive


def _identity(ctx: Context, provider: str):
    """The profile and today's identity of the provider's executable (no jail, nothing runs)."""
    adapter = get_adapter(provider)
    profile = profiles.load(provider)
    cfg = config_mod.load(ctx.paths.config_file)
    path_env = ctx.env.get("PATH", os.defpath)
    if provider == "shell":
        found = Path(identity.login_shell())
    else:
        found = identity.find(profile.executables, path_env, cfg.executables.get(provider), provider)
    resolved = identity.resolve(adapter, found, path_env, ctx.store)
    return profile, resolved.identity.to_data()


def preview(ctx: Context, provider: str, capabilities: tuple[str, ...], details: bool,
            domains: tuple[str, ...] = (), mcp: tuple[str, ...] = (), credentials: bool = False) -> dict:
    """domains: --allow-domain patterns to approve beyond what the capabilities declare; mcp: the
    config's MCP servers, each bound to its command's digest today."""
    profile, ident = _identity(ctx, provider)
    unknown = [c for c in capabilities if c not in profile.optional]
    if unknown:
        raise UsageError(f"{provider}: unknown capability {unknown[0]!r}",
                         hint=f"see: tmuxjail profiles show {provider}")
    caps = tuple(dict.fromkeys((*profile.baseline, *capabilities)))
    asked = netpolicy.normalize(netpolicy.check_pattern(d) for d in domains)
    extra = netpolicy.extra_domains(asked, netpolicy.declared(profile, caps))
    caps = (*caps, *(netpolicy.DOMAIN_ITEM + d for d in extra))
    if mcp:
        from ..plan import mcp_servers

        servers = mcp_servers(config_mod.load(ctx.paths.config_file), mcp, ctx.store)
        caps = (*caps, *(netpolicy.mcp_item(s.name, s.sha256) for s in servers))
    if credentials:
        caps = (*caps, netpolicy.CREDENTIALS_ITEM)
    return {
        "provider": provider, "profile_version": profile.profile_version, "profile_hash": profile.hash,
        "executable": approvals.identity_key(ident), "capabilities": list(caps),
        "labels": {c: approvals.label(profile, c) for c in caps},
        "text": approvals.describe(profile, ident, caps, details),
    }


def record(ctx: Context, plan: dict) -> dict:
    user = pwd.getpwuid(os.getuid()).pw_name
    row = ctx.store.add_approval(plan["provider"], plan["profile_version"], plan["profile_hash"],
                                 plan["executable"], plan["capabilities"], user)
    log.info("approve", provider=plan["provider"], approval=row["id"], capabilities=plan["capabilities"])
    return row


def ask_and_record(ctx: Context, provider: str, capabilities, yes: bool, details: bool, json_out: bool,
                   domains=(), mcp=(), credentials=False) -> dict | None:
    plan = preview(ctx, provider, tuple(capabilities), details, tuple(domains), tuple(mcp), credentials)
    if not json_out:
        print("This approval lets verified-mode sessions use:")
        print("\n".join(plan["text"]))
    if not yes:
        if not interactive():
            raise UsageError("approving needs a terminal to confirm, or --yes after reviewing the text above")
        if not confirm("Approve?"):
            print("not approved")
            return None
    return record(ctx, plan)

