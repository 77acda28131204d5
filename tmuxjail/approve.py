"""Use cases of verified mode: preview and record approvals, list and revoke them, preflight."""

from __future__ import annotations

import os
import pwd

from . import sessions
from .errors import UsageError


def _identity(ctx, provider: str):
    """The profile and today's identity of the provider's executable (no jail, nothing runs)."""
    from . import config as config_mod
    from . import identity, profiles
    from .adapters import get as get_adapter

    adapter = get_adapter(provider)
    profile = profiles.load(provider)
    cfg = config_mod.load(ctx.paths.config_file)
    path_env = ctx.env.get("PATH", os.defpath)
    if provider == "shell":
        from pathlib import Path

        found = Path(identity.login_shell())
    else:
        found = identity.find(profile.executables, path_env, cfg.executables.get(provider), provider)
    resolved = identity.resolve(adapter, found, path_env, ctx.store)
    return profile, resolved.identity.model_dump(mode="json")


def preview(ctx, provider: str, capabilities: tuple[str, ...], details: bool,
            domains: tuple[str, ...] = ()) -> dict:
    """domains: --allow-domain patterns to approve beyond what the capabilities declare."""
    from . import approvals, netpolicy

    profile, ident = _identity(ctx, provider)
    unknown = [c for c in capabilities if c not in profile.optional]
    if unknown:
        raise UsageError(f"{provider}: unknown capability {unknown[0]!r}",
                         hint=f"see: tmuxjail profiles show {provider}")
    caps = tuple(dict.fromkeys((*profile.baseline, *capabilities)))
    asked = netpolicy.normalize(netpolicy.check_pattern(d) for d in domains)
    extra = netpolicy.extra_domains(asked, netpolicy.declared(profile, caps))
    caps = (*caps, *(netpolicy.DOMAIN_ITEM + d for d in extra))
    return {
        "provider": provider, "profile_version": profile.profile_version, "profile_hash": profile.hash,
        "executable": approvals.identity_key(ident), "capabilities": list(caps),
        "labels": {c: approvals.label(profile, c) for c in caps},
        "text": approvals.describe(profile, ident, caps, details),
    }


def record(ctx, plan: dict) -> dict:
    from . import log

    user = pwd.getpwuid(os.getuid()).pw_name
    row = ctx.store.add_approval(plan["provider"], plan["profile_version"], plan["profile_hash"],
                                 plan["executable"], plan["capabilities"], user)
    log.info("approve", provider=plan["provider"], approval=row["id"], capabilities=plan["capabilities"])
    return row


def listing(ctx, include_revoked: bool = False) -> list[dict]:
    return ctx.readonly_store().approvals(include_revoked=include_revoked)


def revoke(ctx, provider: str) -> int:
    from .adapters import get as get_adapter

    get_adapter(provider)  # unknown provider: exit 2
    return ctx.store.revoke(provider)


def preflight(ctx, opts) -> dict:
    """Everything a start checks, and nothing it does: never prompts, never launches."""
    workspaces = sessions._canonical_workspaces(opts.workspaces, ctx.env.get("PWD") or os.getcwd())
    _, pol, fp, *_, approval = sessions._resolve(
        ctx, opts.provider, opts.mode, workspaces, opts.env_name, opts.capabilities, opts.restriction,
        network=opts.network, candidate=opts.candidate, allow_domains=opts.allow_domains)
    return {"ok": True, "provider": opts.provider, "mode": pol["mode"], "fingerprint": fp,
            "workspace": workspaces[0], "capabilities": list(pol["capabilities"]),
            "approval": approval["id"] if approval else None}
