"""Pure policy resolution: a request plus the facts gathered about the host -> a frozen Policy,
its fingerprint, and the reason codes that separate two policies. No I/O here."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from . import budget
from .canon import fingerprint as _fingerprint
from .config import NETWORKS, network_fix
from .effective import GIT_WRITE as GIT_WRITE  # defined where the warm start reads them
from .effective import SCHEMA, Limits, McpServer, Network, Policy
from .effective import never_passed as never_passed
from .errors import NotApproved, UsageError
from .model import Mode, Profile
from .net import policy as netpolicy
from .subpath import below, inside

if TYPE_CHECKING:
    from .adapters.base import Adapter
    from .identity import Resolved

STRICT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Passed into strict jails when the caller has them: terminal and locale only.
BASE_ENV = (
    "TERM", "COLORTERM", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE",
    "LC_NUMERIC", "LC_TIME", "LC_MONETARY", "TZ", "NO_COLOR", "EDITOR", "VISUAL", "PAGER",
)
# Variables that make a program load code of the caller's choosing. Never passed into a strict
# jail, even when a profile declares them.
INJECTION_ENV = frozenset({
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "NODE_OPTIONS", "NODE_PATH",
    "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT",
    "RUBYLIB", "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS", "DYLD_INSERT_LIBRARIES", "DYLD_LIBRARY_PATH", "GIT_EXEC_PATH",
})


REASONS = {
    "mode": "mode", "provider": "profile", "profile_version": "profile", "profile_hash": "profile",
    "executable": "executable", "install_roots": "executable",
    "capabilities": "capabilities", "host_read": "capabilities", "host_write": "capabilities",
    "workspace_read": "workspace", "workspace_write": "workspace", "protected": "workspace",
    "env_inherit": "environment", "env_names": "environment", "env_set": "environment",
    "home": "home", "private_home": "home", "network": "network", "allow_domains": "network",
    "resolve": "network", "state_guards": "provider-state", "state_copies": "provider-state",
    "state_audit": "provider-state",
    "backend": "backend", "hidden": "backend", "schema_version": "backend", "limits": "limits",
    "worktree": "workspace", "mcp": "mcp", "mcp_stub": "mcp", "credentials": "home",
}


@dataclass(frozen=True)
class Request:
    provider: str
    mode: Mode
    workspaces: tuple[str, ...]  # canonical absolute paths, the first is the cwd
    env_name: str = "default"
    capabilities: tuple[str, ...] = ()
    network: str | None = None  # None: the config's for this mode
    allow_domains: tuple[str, ...] = ()  # --allow-domain (netpolicy: narrows, or in verified adds)
    worktree: tuple[str, str] | None = None  # --worktree: (its git directory, the repository's objects)
    mcp: tuple[McpServer, ...] = ()  # --mcp: the servers as plan.mcp_servers found them (hashed)
    mcp_stub: str = ""  # the interpreter the jail runs the MCP stub with (plan.stub_python)
    credentials: tuple[tuple[str, str], ...] = ()  # the stored login's files (plan.stored_credentials)


@dataclass(frozen=True)
class Facts:
    """What sessions looked up on the host, so that resolve() stays pure."""

    home: str
    uid: int
    user: str
    login_shell: str
    own_dirs: tuple[str, ...]  # tmuxjail's config, state and data dirs
    config_dir: str
    private_home: str  # where this provider/env's private home lives
    backend: str
    executable: Resolved
    allowed_modes: tuple[str, ...]
    # Every `.git` found at start in the workspaces (directory, file or symlink), and the gitdir a
    # `.git` file names when it lies inside a workspace: host.git_guards().
    git_paths: tuple[str, ...] = ()
    # The trust catalogue's other guard entries present at start (docs/workspace-trust.md).
    trust_paths: tuple[str, ...] = ()
    realpaths: dict[str, str] = field(default_factory=dict)  # declared host path -> canonical
    limits: dict[str, Any] = field(default_factory=dict)  # the operator's overrides of effective.Limits
    # The user's real per-user limits (host.user_limits()); empty: the defaults of effective.Limits.
    user_limits: dict[str, Any] = field(default_factory=dict)
    namespace_limits: bool = True  # False: the config accepts budget.GUARD missing
    network: str = "host"  # the config's network for this mode (already narrowed by the environment)
    env_network: str | None = None  # TMUXJAIL_NETWORK, when set (what narrowed `network`)
    resolve: tuple[tuple[str, str, bool], ...] = ()  # the config's [network.resolve] (proxy only)
    allow_ceiling: tuple[str, ...] = (netpolicy.ANY,)  # the config's allow_domains for this mode
    # What the launcher runs outside every jail (tmuxjail's package, venv, interpreter, stdlib,
    # bwrap) where a jail of this user could write it: read-only in compatibility jails.
    own_install: tuple[str, ...] = ()
    state_copies: str = ""  # where this provider/env's private copies of state files live (paths.state_copies)


def _network(req: Request, facts: Facts) -> Network:
    """The request may narrow the operator's network for this mode, never widen it."""
    want = req.network or facts.network
    if want not in NETWORKS:
        raise UsageError(f"network {want!r}: must be host, proxy or none")
    if NETWORKS.index(want) > NETWORKS.index(facts.network):
        raise NotApproved(
            f"network {want} is not allowed in {req.mode.value} mode (the widest allowed there is {facts.network})",
            hint="to allow it: " + network_fix(req.mode.value, want, facts.config_dir + "/config.toml",
                                               facts.env_network),
            data={"reason": "network"},
        )
    return cast("Network", want)  # one of NETWORKS: checked above


# Never a strict workspace (they are bound read-only or made by the jail itself); a menu item or a
# jail's cwd must not turn one of them into a writable bind.
SYSTEM_ROOTS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/proc",
                "/sys", "/dev", "/run", "/opt", "/var/run")


def _check_install_roots(roots: Iterable[str], facts: Facts) -> None:
    """An install root is bound read-only into strict jails: one that holds the home or
    tmuxjail's own state would hand the jail your files (a stray ~/package.json made the
    whole home a CLI's package root)."""
    for root in roots:
        if root == "/" or inside(facts.home, root) or any(inside(own, root) for own in facts.own_dirs):
            raise UsageError(
                f"the CLI's install root {root} would contain your home or tmuxjail's own files; refusing",
                hint="install the CLI in its own directory (e.g. npm's global prefix), or remove the "
                     "package.json that makes this directory look like its package",
            )


def _check_workspace(ws: str, facts: Facts, strict: bool) -> None:
    if not os.path.isabs(ws) or os.path.normpath(ws) != ws:
        raise UsageError(f"workspace {ws!r} is not a canonical absolute path")
    if ws == "/":
        raise UsageError("the workspace cannot be / (that would make the whole host writable)")
    if strict and any(inside(ws, d) for d in SYSTEM_ROOTS):
        raise UsageError(
            f"workspace {ws} is a system directory; a strict mode would make it writable",
            hint="pick a project directory inside your home instead",
        )
    if strict and inside(facts.home, ws):
        raise UsageError(
            f"workspace {ws} contains your home {facts.home}; a strict mode would expose it",
            hint="pick a project directory inside your home (e.g. --workspace ~/src/app), "
                 "or run the home itself in --mode compatibility",
        )
    for own in facts.own_dirs:
        # Compatibility may run from a directory that contains tmuxjail's own (e.g. `cd ~`): the
        # host is visible there anyway, and the policy hides the state and keeps the config
        # read-only inside the jail all the same. Strict modes would bind them writable.
        if inside(ws, own) or (strict and inside(own, ws)):
            raise UsageError(f"workspace {ws} overlaps tmuxjail's own directory {own}",
                             hint="pick a directory that neither is inside nor contains it"
                                  + (", or use --mode compatibility" if strict and not inside(ws, own) else ""))


def _check_worktree(worktree: tuple[str, str] | None, mode: Mode, facts: Facts) -> None:
    """A worktree session's git directory lives in tmuxjail's state and is bound at a path only the
    jail has: that needs a strict mode's own mount namespace (bwrap), never compatibility's host view."""
    if worktree is None:
        return
    if not mode.strict:
        raise UsageError("--worktree needs isolated or verified mode",
                         hint="in compatibility mode the agent could write the repository's hooks and config anyway")
    if facts.backend != "bwrap":
        raise UsageError(f"--worktree is not available with the {facts.backend} sandbox yet (it needs bubblewrap)")
    gitdir = worktree[0]
    if not any(inside(gitdir, own) for own in facts.own_dirs):
        raise UsageError(f"the worktree's git directory {gitdir} is not in tmuxjail's state; refusing it")


# A jail's own /proc, /sys, /dev and /run (MCP servers' read paths: _check_mcp).
MCP_MOUNTED = ("/proc", "/sys", "/dev", "/run", "/var/run")


def _check_mcp(req: Request, adapter: Adapter, facts: Facts, host_write: tuple[str, ...], jail_env: set[str]) -> None:
    """The broker runs a server outside the jail: nothing it runs or reads may be a file the
    agent can write (a workspace, its private home or state, a path bound back writable). A
    server in the jail (run = "jail") has its command and read paths bound read-only into it:
    the same holds (a bind would hide what the jail writes there), and none may hold the home."""
    if not req.mcp:
        return
    if not req.mode.strict:
        raise UsageError("--mcp needs isolated or verified mode",
                         hint="in compatibility mode the CLI reads whatever MCP configuration it finds itself")
    if facts.backend != "bwrap":
        raise UsageError(f"--mcp is not available with the {facts.backend} sandbox yet (it needs bubblewrap)")
    if not adapter.takes_mcp:
        raise UsageError(f"{req.provider}: --mcp is not supported for this CLI yet (docs/mcp.md says which are)")
    writable = [*req.workspaces, *host_write, facts.private_home, facts.state_copies]
    for server in req.mcp:
        both = sorted(set(server.env) & jail_env)
        if both:
            raise UsageError(f"mcp.{server.name}: {both[0]} would enter the jail too (a capability of this session "
                             "passes it); a server's secret is for the server only",
                             hint="drop that capability, or give the server its secret in an env_file")
        # Paths a jail mounts its own of (a read bind would put the host's in their place: the
        # host's /proc reaches every process's root) or where sockets live (read-only binds do not
        # stop connect()): never a server's command or read path, whichever jail it runs in.
        named = (server.command, *server.read)
        special = next(((p, r) for p in named for r in MCP_MOUNTED if inside(p, r) or inside(r, p)), None) or \
            next(((p, r) for p in named for r in ("/tmp", "/var/tmp") if inside(r, p)), None)  # (a directory in it is fine)
        if special is not None:
            raise UsageError(f"mcp.{server.name}: {special[0]} overlaps {special[1]}, which a jail mounts its own of "
                             "or where sockets live; refusing it", hint="name the server's own install directories")
        if server.run == "jail":  # its command and read paths are bound read-only into the agent's jail
            wide = next((p for p in named if inside(facts.home, p)), None)
            if wide is not None:
                raise UsageError(f"mcp.{server.name}.read: {wide} holds your home; with run = \"jail\" it would "
                                 "be shown to the agent whole", hint="name the server's own directories instead")
        paths = [(p, [*writable, *facts.own_dirs]) for p in (server.command, *server.read)]
        if server.env_file:  # read by tmuxjail itself: its config directory is a fine place
            paths.append((server.env_file, [*writable, *(d for d in facts.own_dirs if d != facts.config_dir)]))
        for path, roots in paths:
            hit = next((w for w in roots if w and (inside(path, w) or inside(w, path))), None)
            if hit is not None:
                raise UsageError(f"mcp.{server.name}: {path} overlaps {hit}, which the jail can write or "
                                 "tmuxjail keeps; " + ("its files are bound into the jail" if server.run == "jail"
                                                       else "the broker runs the server outside the jail")
                                 + ", so refusing", hint="install the server outside the workspace (e.g. /usr/local or /opt)")


def _config_shares_a_dir(facts: Facts) -> bool:
    cfg = facts.config_dir
    others = [d for d in facts.own_dirs if d != cfg]
    return facts.own_dirs.count(cfg) > 1 or any(inside(d, cfg) or inside(cfg, d) for d in others)


def _expand(path: str, home: str) -> str:
    return home + path[1:] if path.startswith("~/") else path


def _host_paths(caps: Iterable[str], profile: Profile, facts: Facts) -> tuple[tuple[str, ...], tuple[str, ...]]:
    read: list[str] = []
    write: list[str] = []
    for cid in caps:
        for grant in profile.capabilities[cid].paths:
            lexical = _expand(grant.path, facts.home)
            real = facts.realpaths.get(lexical, lexical)
            # A symlink that leads out of the place the profile named is refused, not followed.
            limit = facts.home if grant.path.startswith("~/") else lexical
            if real != lexical and not (inside(real, limit) and real != limit):
                raise UsageError(
                    f"capability {cid}: {lexical} resolves to {real}, outside {limit}; refusing to bind it"
                )
            for own in facts.own_dirs:
                if inside(real, own) or inside(own, real):
                    raise UsageError(f"capability {cid}: {real} overlaps tmuxjail's own directory {own}")
            (write if grant.access == "rw" else read).append(real)
    return tuple(sorted(set(read) - set(write))), tuple(sorted(set(write)))


def resolve(req: Request, profile: Profile, adapter: Adapter, facts: Facts) -> Policy:
    mode = req.mode
    if mode.value not in facts.allowed_modes:
        raise NotApproved(
            f"mode {mode.value} is not allowed by the operator config",
            hint="allowed modes: " + ", ".join(facts.allowed_modes),
        )
    if not req.workspaces:
        raise UsageError("no workspace")
    for ws in req.workspaces:
        _check_workspace(ws, facts, mode.strict)
    _check_worktree(req.worktree, mode, facts)
    unknown = [c for c in req.capabilities if c not in profile.optional]
    if unknown:
        raise UsageError(f"{profile.provider}: unknown capability {unknown[0]!r}",
                         hint="see: tmuxjail profiles show " + profile.provider)
    if req.capabilities and mode is not Mode.verified and not (
            mode is Mode.isolated and set(req.capabilities) == {GIT_WRITE}):
        raise UsageError(f"--capability applies to verified mode only ({GIT_WRITE} also in isolated mode)")
    caps = tuple(dict.fromkeys((*profile.baseline, *req.capabilities)))
    resolved = facts.executable
    network = _network(req, facts)
    allow_domains = netpolicy.allowlist(mode.value, network, req.allow_domains,
                                        netpolicy.declared(profile, caps), facts.allow_ceiling)
    if mode.strict:
        _check_install_roots(resolved.install_roots, facts)

    host_read: tuple[str, ...] = ()
    host_write: tuple[str, ...] = ()
    guards: tuple[str, ...] = ()
    copies: tuple[tuple[str, str], ...] = ()
    audited: tuple[str, ...] = ()
    if mode is Mode.verified:
        host_read, host_write = _host_paths(caps, profile, facts)
        guards, copies, audited = state_files(adapter, caps, profile, facts, host_write)
    _check_mcp(req, adapter, facts, host_write, {n for cid in caps for n in profile.capabilities[cid].env})

    # Strict modes: every .git present at start is bound read-only onto itself (README, "Git
    # metadata"), and so is every guard entry of the trust catalogue (docs/workspace-trust.md);
    # git-metadata-write lifts them all.
    protected: list[str] = []
    if mode.strict and GIT_WRITE not in caps:
        protected += sorted({p for p in (*facts.git_paths, *facts.trust_paths)
                             if any(inside(p, ws) for ws in req.workspaces)})
    shared = _config_shares_a_dir(facts)
    if not mode.strict and not shared:
        protected.append(facts.config_dir)
    if not mode.strict:  # shared too: macOS puts config, state and data in one (hidden) directory
        protected += [p for p in facts.own_install if p not in protected]

    env_set: dict[str, str] = {}
    env_names: tuple[str, ...] = ()
    if mode.strict:
        declared = {n for cid in caps for n in profile.capabilities[cid].env}
        env_names = tuple(sorted(n for n in {*BASE_ENV, *declared}
                                 if n not in INJECTION_ENV and not never_passed(n)))
        if network == "proxy":  # the jail's own proxy variables replace the host's
            env_names = netpolicy.strip_proxy_env(env_names)
        env_set = {
            "HOME": facts.home, "USER": facts.user, "LOGNAME": facts.user,
            "SHELL": facts.login_shell, "PATH": STRICT_PATH, "TMPDIR": "/tmp",
        }
    env_set.update(adapter.env(facts.home, mode, facts.uid))
    if network == "proxy":
        env_set.update(adapter.proxy_env)

    # Compatibility leaves the config readable only when it has a directory of its own: on macOS
    # platformdirs puts config, state and data in one directory, which stays hidden whole.
    hidden = tuple(sorted({d for d in facts.own_dirs if d != facts.config_dir or mode.strict or shared}))
    return Policy(
        schema_version=SCHEMA,
        mode=mode,
        provider=profile.provider,
        backend=facts.backend,
        profile_version=profile.profile_version,
        profile_hash=profile.hash,
        executable=resolved.identity,
        install_roots=tuple(resolved.install_roots),
        home=facts.home,
        private_home=facts.private_home if mode is Mode.isolated else None,
        workspace_read=(),
        workspace_write=tuple(req.workspaces),
        host_read=host_read,
        host_write=host_write,
        protected=tuple(protected),
        hidden=hidden,
        env_inherit=not mode.strict,
        env_names=env_names,
        env_set=tuple(sorted(env_set.items())),
        capabilities=caps,
        limits=_limits(facts),
        network=network,
        allow_domains=allow_domains,
        resolve=facts.resolve if network == "proxy" else (),
        state_guards=guards,
        state_copies=copies,
        state_audit=audited,
        worktree=tuple(req.worktree or ()),
        mcp=req.mcp, mcp_stub=req.mcp_stub, credentials=req.credentials if mode.strict else (),
    ).checked()


def state_files(adapter: Adapter, caps: Iterable[str], profile: Profile, facts: Facts, host_write: tuple[str, ...]
                ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The adapter's state_guards, state_copies and state_audit that lie in a host path bound back
    writable, as the host paths they are there (below the grant's real path: a ~/.codex that is a link into the
    home guards the files where they really are). A copy's source is its path below
    facts.state_copies, which the launcher opens without following links."""
    grants = [_expand(g.path, facts.home) for cid in caps for g in profile.capabilities[cid].paths]
    guards: set[str] = set()
    audited: set[str] = set()
    copies: dict[str, str] = {}
    for rels, kind in ((adapter.state_guards, "guard"), (adapter.state_copies, "copy"), (adapter.state_audit, "audit")):
        for rel in rels:
            lexical = facts.home + "/" + rel.rstrip("/")
            for grant in grants:
                real = facts.realpaths.get(grant, grant)
                if not inside(lexical, grant) or real not in host_write:
                    continue
                path = real + lexical[len(grant):]
                if kind == "copy":
                    copies[path] = facts.state_copies + "/" + rel
                else:
                    (guards if kind == "guard" else audited).add(path)
    return tuple(sorted(guards)), tuple(sorted(copies.items())), tuple(sorted(audited))


def _limits(facts: Facts) -> Limits:
    caps = Limits(**facts.limits)
    if not facts.user_limits:
        return caps
    return budget.jail_limits(caps, facts.user_limits, facts.limits, facts.config_dir + "/config.toml",
                              facts.namespace_limits)


def fingerprint(policy: Policy | dict[str, Any]) -> str:
    return _fingerprint(policy if isinstance(policy, dict) else policy.to_data())


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Reason codes (DESIGN §2) for every field that differs, in a stable order."""
    codes = {REASONS.get(k, "backend") for k in set(old) | set(new) if old.get(k) != new.get(k)}
    order = ["mode", "profile", "executable", "capabilities", "workspace", "environment", "home",
             "provider-state", "network", "mcp", "limits", "backend"]
    return [c for c in order if c in codes]


def workspace_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed in the workspaces, in words (a `workspace` refusal said only its code, 28.15):
    a repository or another guarded path that appeared or went, workspaces added or dropped."""
    roots = [*old.get("workspace_write", []), *old.get("workspace_read", [])]

    def rel(path: str) -> str:
        for r in roots:
            if below(path, r):
                return path[len(r.rstrip("/")) + 1:]
        return path

    out = []
    before, after = set(old.get("protected", [])), set(new.get("protected", []))
    for p in sorted(after - before):
        out.append(f"a new repository appeared at `{rel(p)}`" if p.endswith("/.git")
                   else f"`{rel(p)}` appeared (kept read-only in the jail)")
    for p in sorted(before - after):
        out.append(f"the repository at `{rel(p)}` is gone" if p.endswith("/.git") else f"`{rel(p)}` is gone")
    for key, what in (("workspace_write", "workspace"), ("workspace_read", "read-only workspace")):
        was, now = set(old.get(key, [])), set(new.get(key, []))
        out += [f"{what} `{p}` was added" for p in sorted(now - was)]
        out += [f"{what} `{p}` was dropped" for p in sorted(was - now)]
    return out
