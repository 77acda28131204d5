"""Resolution: a request's preconditions -> the executable -> Facts -> policy.resolve -> a named
Plan. The same steps recompute a stored session's policy for resume, shell, `_pane` and
`list --check`. Nothing here starts anything."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass, replace
from pathlib import Path

from . import budget, catalogue, host, identity, policy, profiles, restrict
from . import config as config_mod
from .adapters import Adapter
from .adapters import get as get_adapter
from .approvals import find as find_approval
from .approvals import fix_command, missing
from .context import Context
from .discover import candidate as cand
from .errors import ConfigError, NotApproved, ResumeRefused, SandboxUnavailable, UsageError
from .model import Mode, Policy, Profile
from .net.policy import approval_items
from .policy import Facts
from .request import StartOptions as StartOptions  # where callers have always found them
from .request import canonical_workspaces, check_env_name, mode_of, sandbox
from .sandbox import bwrap


@dataclass(frozen=True)
class Plan:
    """Everything a start or resume needs, from today's inputs."""

    request: policy.Request
    policy: Policy
    fingerprint: str
    adapter: Adapter
    resolved: identity.Resolved
    backend: bwrap.Bwrap
    unguarded: bool  # no sandbox at all (compatibility-unguarded, an operator's opt-in)
    approval: dict | None  # the approval a verified run goes under
    facts: Facts  # what the policy was resolved from (warm.py records it with the policy)


@dataclass(frozen=True)
class Recheck:
    """A stored session's policy recomputed from today's inputs: what a resume would run, and the
    reason codes that separate it from the recorded one (policy None: it could not be built)."""

    fingerprint: str
    policy: Policy | None
    reasons: list[str]


def resolve(ctx: Context, provider: str, mode_name: str | None, workspaces: tuple[str, ...],
            env_name: str, capabilities: tuple[str, ...], restriction: dict | None = None,
            gate: bool = True, network: str | None = None, candidate: str | None = None,
            allow_domains: tuple[str, ...] | None = None) -> Plan:
    """Verified mode also needs an approval that covers exactly this profile, executable and
    capability set; without one this raises NotApproved before anything runs (unless gate is off)."""
    adapter = get_adapter(provider)
    check_env_name(env_name)
    cfg = config_mod.load(ctx.paths.config_file)
    mode = mode_of(mode_name, cfg)
    if network is not None:
        config_mod.check_network(network, "--network", UsageError)
    profile = profile_for(ctx, provider, candidate)
    box = sandbox(cfg, mode)
    backend, unguarded, why = box.backend, box.unguarded, box.why
    store = ctx.store
    path_env = ctx.env.get("PATH", os.defpath)
    if provider == "shell":
        found = Path(identity.login_shell())
    else:
        found = identity.find(profile.executables, path_env, cfg.executables.get(provider), provider)
    resolved = identity.resolve(adapter, found, path_env, store)

    p = ctx.paths
    home = str(p.home)
    pw = pwd.getpwuid(os.getuid())
    req = policy.Request(provider=provider, mode=mode, workspaces=workspaces, env_name=env_name,
                         capabilities=tuple(capabilities), network=network, allow_domains=tuple(allow_domains or ()))
    declared = declared_paths(profile, home)
    facts = policy.Facts(
        home=home, uid=os.getuid(), user=pw.pw_name, login_shell=identity.login_shell(),
        own_dirs=tuple(str(d) for d in p.own_dirs()), config_dir=str(p.config_dir),
        private_home=str(p.private_home(provider, env_name, workspaces[0] if workspaces else None)),
        backend="none" if unguarded else backend.name, executable=resolved,
        allowed_modes=cfg.allowed_modes, **guard_facts(workspaces, mode.strict),
        realpaths=host.realpaths(declared), limits=cfg.limits, user_limits=host.user_limits(),
        namespace_limits=budget.GUARD not in cfg.accept_missing_guards,
        network=cfg.network[mode.value],
        env_network=cfg.env_network, resolve=cfg.resolve, allow_ceiling=cfg.allow_domains[mode.value],
        own_install=() if mode.strict else host.own_install(),
        state_copies=str(p.state_copies(provider, env_name, workspaces[0] if workspaces else None)),
    )
    if restriction is not None:
        base = policy.resolve(req, profile, adapter, facts)  # refuses what the config refuses
        modes, names = restrict.apply(
            restriction["rules"], source=restriction["source"], home=home, allowed_modes=cfg.allowed_modes,
            mode=mode, optional_caps=profile.optional, requested_caps=tuple(capabilities),
            workspaces=workspaces, env_names=base.env_names)
        facts = replace(facts, allowed_modes=modes)
        pol = policy.resolve(req, profile, adapter, facts).model_copy(update={"env_names": tuple(names)})
    else:
        pol = policy.resolve(req, profile, adapter, facts)
    if unguarded and pol.network != "host":
        raise SandboxUnavailable(f"network {pol.network} cannot be enforced: {why}",
                                 hint="sudo apt-get install -y bubblewrap   (then: tmuxjail doctor)")
    approval = None
    if mode is Mode.verified and gate:
        approval = approval_for(store, profile, pol)
    return Plan(req, pol, policy.fingerprint(pol), adapter, resolved, backend, unguarded, approval, facts)


def declared_paths(profile: Profile, home: str) -> list[str]:
    """The host paths the profile's capabilities name (their realpaths are facts of the policy)."""
    return [g.path.replace("~", home, 1) for c in profile.capabilities.values() for g in c.paths]


def profile_for(ctx: Context, provider: str, candidate: str | None = None) -> Profile:
    """The shipped profile, or an approved discovery candidate (tmuxjail.discover.candidate)."""
    if candidate is None:
        return profiles.load(provider)
    return cand.load(ctx.paths.config_dir, provider, candidate)


def guard_facts(workspaces, strict: bool) -> dict[str, tuple[str, ...]]:
    """The guarded paths of a strict start (host.guards), as Facts fields. The catalogue is
    validated here (pydantic) on every full resolution; the warm start reads the same data."""
    if not strict:
        return {"git_paths": (), "trust_paths": ()}
    catalogue.validated()
    found = host.guards(workspaces)
    if found.capped:
        # Fail closed: a guarded path the walk did not reach would be writable, and a jail
        # decides how large its workspace grows between two starts.
        raise SandboxUnavailable(
            f"the workspace is too large to find every .git and other guarded path in it ({found.capped})",
            hint="start on a narrower --workspace (docs/workspace-trust.md, \"Limits\")")
    return {"git_paths": found.git, "trust_paths": found.trusted}


def approval_for(store, profile: Profile, pol: Policy) -> dict:
    granted = store.approvals(profile.provider)
    exe = pol.executable.model_dump(mode="json")
    caps = approval_items(profile, policy.as_data(pol))  # capabilities, plus domain:X for each domain added
    found = find_approval(granted, profile.provider, profile.hash, exe, caps)
    if found is None:
        why = missing(granted, profile, exe, caps)
        fix = fix_command(profile.provider, caps, profile.baseline)
        if "+" in profile.profile_version:  # a discovery candidate (tmuxjail.discover.candidate)
            fix = f"tmuxjail approve {profile.provider} --candidate {profile.profile_version.split('+', 1)[1]}"
        raise NotApproved(
            f"verified mode needs an approval: {'; '.join(why)}",
            hint=f"review and approve with: {fix}",
            data={"missing": why, "fix": fix, "provider": profile.provider},
        )
    return found


def refuse(row, reasons: list[str], message: str, hint: str) -> ResumeRefused:
    return ResumeRefused(message, hint=hint, data={"name": row.name, "reasons": reasons})


def recompute(ctx: Context, row) -> Recheck:
    """Today's policy for a stored session, and the reason codes vs the stored one."""
    r = row.request_data
    try:
        workspaces = canonical_workspaces(tuple(r["workspaces"]), "/")
        if tuple(workspaces) != tuple(r["workspaces"]):
            return Recheck("", None, ["workspace"])
        plan = resolve(ctx, r["provider"], r["mode"], workspaces, r["env_name"],
                       tuple(r.get("capabilities", ())), r.get("restriction"), gate=False,
                       network=r.get("network"), candidate=r.get("candidate"),
                       allow_domains=r.get("allow_domains"))
    except NotApproved as exc:
        return Recheck("", None, [exc.data.get("reason", "mode")])
    except ConfigError as exc:
        raise refuse(row, ["config"], f"cannot recompute the policy of {row.name}: {exc.message}",
                     "fix the config (`tmuxjail doctor` shows its path), then retry") from None
    except UsageError as exc:
        raise refuse(row, ["workspace"], f"cannot recompute the policy of {row.name}: {exc.message}",
                     "fix the cause, or start a new session") from None
    return Recheck(plan.fingerprint, plan.policy, policy.diff(row.policy_data or {}, policy.as_data(plan.policy)))


def said(row, pol: Policy | None, reasons: list[str]) -> str:
    """The reason codes, with what changed in the workspaces spelled out."""
    words = ", ".join(reasons)
    if "workspace" in reasons and pol is not None:
        changes = policy.workspace_changes(row.policy_data or {}, policy.as_data(pol))
        if changes:
            words += ": " + "; ".join(changes)
    return words


def still_approved(ctx: Context, row, pol: Policy, store=None) -> dict:
    """The approval a verified session runs under, else refuse (resume, shell, and list --check)."""
    try:
        return approval_for(store or ctx.store, profile_for(ctx, row.provider, row.request_data.get("candidate")),
                            pol)
    except NotApproved as exc:
        raise refuse(row, ["capabilities"], f"{row.name}: {exc.message}", exc.hint or "") from None


def listed(ctx: Context, row) -> Recheck:
    """`list --check`: what a resume of this row would find, approvals included."""
    got = recompute(ctx, row)
    if got.fingerprint == row.fingerprint and got.policy is not None and got.policy.mode is Mode.verified:
        still_approved(ctx, row, got.policy, ctx.readonly_store())  # as resume checks it
    return got


def checked(ctx: Context, row, action: str, event: str) -> Policy:
    """Today's policy of a stored session, only if it is still exactly the recorded one (and, in
    verified mode, still approved): what a new shell or pane in that jail runs under."""
    got = recompute(ctx, row)
    if got.fingerprint != row.fingerprint or got.policy is None:
        reasons = got.reasons or ["tampered"]
        ctx.store.event(event, row.id, reasons=reasons)
        raise ResumeRefused(
            f"{row.name}: the policy changed since the session started ({said(row, got.policy, reasons)}); "
            f"refusing to {action}",
            hint=f"inspect with `tmuxjail show {row.name}`", data={"name": row.name, "reasons": reasons})
    if got.policy.mode is Mode.verified:
        still_approved(ctx, row, got.policy)
    return got.policy
