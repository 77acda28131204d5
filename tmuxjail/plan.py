"""Resolution: a start request's preconditions -> the host facts (facts.gather) -> Facts ->
policy.resolve -> a named Plan. The same steps recompute a stored session's policy, and
may_run says whether it may run again (reason codes) for resume, shell, `_pane` and
`list --check`. Nothing here starts anything."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from . import budget, catalogue, host, identity, mcpconf, policy, profiles, restrict
from . import config as config_mod
from . import facts as facts_mod
from .adapters import Adapter
from .adapters import get as get_adapter
from .approvals import find as find_approval
from .approvals import fix_command, missing
from .context import Context
from .discover import candidate as cand
from .effective import McpServer, Policy
from .enforce import sandbox
from .errors import ConfigError, NotApproved, ResumeRefused, SandboxUnavailable, UsageError
from .facts import HostFacts
from .model import Mode, Profile
from .net.policy import approval_items
from .policy import Facts
from .request import LOGIN_ENV, StartRequest, canonical_workspaces, check_env_name, mode_of
from .sandbox import bwrap

if TYPE_CHECKING:
    from .sandbox.seatbelt import Seatbelt


@dataclass(frozen=True)
class Plan:
    """Everything a start or resume needs, from today's inputs."""

    request: policy.Request
    policy: Policy
    fingerprint: str
    adapter: Adapter
    resolved: identity.Resolved
    backend: bwrap.Bwrap | Seatbelt
    unguarded: bool  # no sandbox at all (compatibility-unguarded, an operator's opt-in)
    approval: dict | None  # the approval a verified run goes under
    facts: Facts  # what the policy was resolved from
    host: HostFacts  # the host facts among them, as gathered (warm.py records them with the policy)


def policy_request(r: StartRequest, mode: Mode, mcp: tuple[McpServer, ...] = (),
                   credentials: tuple[tuple[str, str], ...] = ()) -> policy.Request:
    """What of a start request reaches the policy (mode: resolved from the config's default;
    mcp: its --mcp servers as mcp_servers found them)."""
    return policy.Request(provider=r.provider, mode=mode, workspaces=r.workspaces, env_name=r.env_name,
                          capabilities=tuple(r.capabilities), network=r.network,
                          allow_domains=tuple(r.allow_domains or ()),
                          worktree=(r.worktree["gitdir"], r.worktree["objects"]) if r.worktree else None,
                          mcp=mcp, mcp_stub=mcpconf.stub_python() if mcp else "", credentials=credentials)


def stored_credentials(p, adapter: Adapter, home: str) -> tuple[tuple[str, str], ...]:
    """The provider's login files the credentials store holds today (regular files, not links),
    each with where the CLI reads it in the jail's home (`tmuxjail login`)."""
    out = []
    for rel in adapter.credential_files:
        path = p.credentials(adapter.provider) / rel
        if path.is_file() and not path.is_symlink():
            out.append((str(path), f"{home}/{rel}"))
    return tuple(out)


def mcp_servers(cfg: config_mod.Config, names: tuple[str, ...], cache) -> tuple[McpServer, ...]:
    """The config's servers of these names, each command's real path hashed (through the digest
    cache); an unknown name refuses."""
    out = []
    for name in dict.fromkeys(names):
        server = cfg.mcp.get(name)
        if server is None:
            declared = ", ".join(sorted(cfg.mcp)) or "none"
            raise UsageError(f"no MCP server {name!r} in the config (declared: {declared})",
                             hint=f"declare it as [mcp.{name}] in {cfg.source} (docs/mcp.md)")
        command = os.path.realpath(server.command)
        mcpconf.executable_file(command, f"{cfg.source}: mcp.{name}.command")
        out.append(McpServer(name=name, command=command, sha256=identity.sha256_file(Path(command), cache),
                             args=server.args, env=server.env, env_file=server.env_file, network=server.network,
                             read=tuple(sorted({os.path.realpath(p) for p in server.read})), tools=server.tools,
                             run=server.run))
    return tuple(sorted(out))


def resolve(ctx: Context, request: StartRequest, gate: bool = True) -> Plan:
    """Verified mode also needs an approval that covers exactly this profile, executable and
    capability set; without one this raises NotApproved before anything runs (unless gate is off)."""
    provider, workspaces, env_name, capabilities = (request.provider, request.workspaces, request.env_name,
                                                    request.capabilities)
    adapter = get_adapter(provider)
    check_env_name(env_name)
    cfg = config_mod.load(ctx.paths.config_file)
    mode = mode_of(request.mode, cfg)
    if request.network is not None:
        config_mod.check_network(request.network, "--network", UsageError)
    profile = profile_for(ctx, provider, request.candidate)
    box = sandbox(cfg, mode)
    backend, unguarded, why = box.backend, box.unguarded, box.why
    store = ctx.store

    p = ctx.paths
    home = str(p.home)
    if mode.strict:
        catalogue.validated()  # pydantic, on every full resolution; the warm start reads the same data
    found = facts_mod.gather(ctx, provider, profile.executables, declared_paths(profile, home), mode, cfg,
                             workspaces, adapter)
    if found.guards.capped:
        # Fail closed: a guarded path the walk did not reach would be writable, and a jail
        # decides how large its workspace grows between two starts.
        raise SandboxUnavailable(
            f"the workspace is too large to find every .git and other guarded path in it ({found.guards.capped})",
            hint="start on a narrower --workspace (docs/workspace-trust.md, \"Limits\")")
    resolved = identity.identify(found.at, store)
    creds = (stored_credentials(p, adapter, home)
             if provider in cfg.credentials and mode.strict and env_name != LOGIN_ENV else ())
    req = policy_request(request, mode, mcp_servers(cfg, request.mcp, store) if request.mcp else (), creds)
    facts = policy.Facts(
        home=home, uid=os.getuid(), user=found.user, login_shell=found.login_shell,
        own_dirs=tuple(str(d) for d in p.own_dirs()), config_dir=str(p.config_dir),
        private_home=str(p.private_home(provider, env_name, workspaces[0] if workspaces else None)),
        backend="none" if unguarded else backend.name, executable=resolved,
        allowed_modes=cfg.allowed_modes, git_paths=found.guards.git, trust_paths=found.guards.trusted,
        realpaths=found.realpaths, limits=cfg.limits, user_limits=host.user_limits(),
        namespace_limits=budget.GUARD not in cfg.accept_missing_guards,
        network=cfg.network[mode.value],
        env_network=cfg.env_network, resolve=cfg.resolve, allow_ceiling=cfg.allow_domains[mode.value],
        own_install=found.own_install,
        state_copies=str(p.state_copies(provider, env_name, workspaces[0] if workspaces else None)),
    )
    restriction = request.restriction
    if restriction is not None:
        base = policy.resolve(req, profile, adapter, facts)  # refuses what the config refuses
        modes, names = restrict.apply(
            restriction["rules"], source=restriction["source"], home=home, allowed_modes=cfg.allowed_modes,
            mode=mode, optional_caps=profile.optional, requested_caps=tuple(capabilities),
            workspaces=workspaces, env_names=base.env_names)
        facts = replace(facts, allowed_modes=modes)
        pol = policy.resolve(req, profile, adapter, facts)._replace(env_names=tuple(names))
    else:
        pol = policy.resolve(req, profile, adapter, facts)
    if unguarded and pol.network != "host":
        raise SandboxUnavailable(f"network {pol.network} cannot be enforced: {why}",
                                 hint="sudo apt-get install -y bubblewrap   (then: tmuxjail doctor)")
    approval = None
    if mode is Mode.verified and gate:
        approval = approval_for(store, profile, pol)
    return Plan(req, pol, policy.fingerprint(pol), adapter, resolved, backend, unguarded, approval, facts, found)


def declared_paths(profile: Profile, home: str) -> list[str]:
    """The host paths the profile's capabilities name (their realpaths are facts of the policy)."""
    return [g.path.replace("~", home, 1) for c in profile.capabilities.values() for g in c.paths]


def profile_for(ctx: Context, provider: str, candidate: str | None = None) -> Profile:
    """The shipped profile, or an approved discovery candidate (tmuxjail.discover.candidate)."""
    if candidate is None:
        return profiles.load(provider)
    return cand.load(ctx.paths.config_dir, provider, candidate)


def approval_for(store, profile: Profile, pol: Policy) -> dict:
    granted = store.approvals(profile.provider)
    exe = pol.executable.to_data()
    caps = approval_items(profile, pol.to_data())  # capabilities, plus domain:X for each domain added
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


@dataclass(frozen=True)
class Recheck:
    """May a stored session run again: its policy recomputed from today's inputs (None: it could
    not be built), the reason codes that separate it from the recorded one, and in verified mode
    the approval it would run under, or why it has none."""

    fingerprint: str
    policy: Policy | None
    reasons: list[str]
    approval: dict | None = None
    unapproved: ResumeRefused | None = None  # the recorded policy, no longer approved

    def refusal(self, row, action: str, hint: str | None = None) -> ResumeRefused | None:
        """Why the session may not `action` (run again) today; None: it may."""
        if self.fingerprint != row.fingerprint or self.policy is None:
            reasons = self.reasons or ["tampered"]
            return refuse(row, reasons, f"{row.name}: the policy changed since the session started "
                                        f"({said(row, self.policy, reasons)}); refusing to {action}",
                          hint or f"inspect with `tmuxjail show {row.name}`")
        return self.unapproved


def may_run(ctx: Context, row, approve: bool = True, store=None) -> Recheck:
    """The one check of resume, shell, `_pane` and `list --check` (the launcher's is its own): the
    stored request resolved again, the reason codes if its policy changed, and (approve, verified
    mode) whether the same policy is still approved, from store (default: the context's).
    Raises ResumeRefused when today's inputs cannot be read at all (config, workspace)."""
    got = recompute(ctx, row)
    if not approve or got.fingerprint != row.fingerprint or got.policy is None or got.policy.mode is not Mode.verified:
        return got
    try:
        return replace(got, approval=approval_for(store or ctx.store, profile_for(
            ctx, row.provider, row.start_request.candidate), got.policy))
    except NotApproved as exc:
        return replace(got, unapproved=refuse(row, ["capabilities"], f"{row.name}: {exc.message}", exc.hint or ""))


def recompute(ctx: Context, row) -> Recheck:
    """Today's policy for a stored session, and the reason codes vs the stored one."""
    r = row.start_request
    try:
        workspaces = canonical_workspaces(r.workspaces, "/")
        if workspaces != r.workspaces:
            return Recheck("", None, ["workspace"])
        plan = resolve(ctx, r, gate=False)
    except NotApproved as exc:
        return Recheck("", None, [exc.data.get("reason", "mode")])
    except ConfigError as exc:
        raise refuse(row, ["config"], f"cannot recompute the policy of {row.name}: {exc.message}",
                     "fix the config (`tmuxjail doctor` shows its path), then retry") from None
    except UsageError as exc:
        raise refuse(row, ["workspace"], f"cannot recompute the policy of {row.name}: {exc.message}",
                     "fix the cause, or start a new session") from None
    return Recheck(plan.fingerprint, plan.policy, policy.diff(row.policy_data or {}, plan.policy.to_data()))


def said(row, pol: Policy | None, reasons: list[str]) -> str:
    """The reason codes, with what changed in the workspaces spelled out."""
    words = ", ".join(reasons)
    if "workspace" in reasons and pol is not None:
        changes = policy.workspace_changes(row.policy_data or {}, pol.to_data())
        if changes:
            words += ": " + "; ".join(changes)
    return words


def still_approved(ctx: Context, row, pol: Policy, store=None) -> dict:
    """The approval a verified session runs under today's (changed) policy, else refuse
    (resume --accept-changes)."""
    try:
        return approval_for(store or ctx.store, profile_for(ctx, row.provider, row.start_request.candidate), pol)
    except NotApproved as exc:
        raise refuse(row, ["capabilities"], f"{row.name}: {exc.message}", exc.hint or "") from None


def listed(ctx: Context, row) -> Recheck:
    """`list --check`: what a resume of this row would find, approvals included."""
    got = may_run(ctx, row, store=ctx.readonly_store())  # as resume checks it
    if got.unapproved is not None:
        raise got.unapproved
    return got


def checked(ctx: Context, row, action: str, event: str) -> Policy:
    """Today's policy of a stored session, only if it may run again (may_run): what a new shell or
    pane in that jail runs under."""
    got = may_run(ctx, row)
    refused = got.refusal(row, action)
    if refused is not None:
        if got.fingerprint != row.fingerprint or got.policy is None:
            ctx.store.event(event, row.id, reasons=refused.data["reasons"])
        raise refused
    assert got.policy is not None
    return got.policy
