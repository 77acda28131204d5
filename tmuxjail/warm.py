"""The warm start: a start whose every input is what an earlier start of the same request resolved
from reuses that resolution's policy (policycache.py) instead of loading pydantic, parsing the
profiles and rebuilding the policy (~300 ms). Stdlib only; the full resolution (plan.py) is
imported only on a miss.

An entry is used only when all of these are what they were when it was made:
- the key: a digest of tmuxjail's installed files (stat identity: a reinstall or an edited source
  misses), the Python and pydantic it runs on, the uid, gid, groups and passwd entry, the user's
  per-user limits (host.user_limits: a jail's share of them is in the policy), the machine,
  every path of ours, the config's bytes and the TMUXJAIL_* variables it reads, PATH, the
  sandbox this host gives the mode, and every part of the request that reaches the policy
  (provider, mode asked and resolved, canonical workspaces, env name, capabilities, network,
  allowed domains, backend);
- the host facts the policy was resolved from, looked up again on every start (record()): where
  the executable and its interpreter really are and their stat identities (the same key the
  digest cache trusts), how it starts, its install roots and package version, the login shell,
  what the profile's host paths resolve to, every .git in a strict jail's workspaces, and which
  of tmuxjail's own install a compatibility jail must get read-only.
The preconditions (enforce.sandbox: bubblewrap, seccomp, Landlock, the pids cgroup) and, in
verified mode, the approval are checked on every start, hit or miss. A request with --restrict,
a discovery candidate or a trace, and a dry run, always resolve in full."""

from __future__ import annotations

import os
import pwd
import stat
import sys
from importlib import import_module
from pathlib import Path

import tmuxjail

from . import approvals, canon, facts, host, hostos, identity, mcpconf
from . import config as config_mod
from .adapters import Adapter
from .adapters import get as get_adapter
from .config import Config
from .context import Context
from .effective import Policy
from .enforce import sandbox
from .errors import ConfigError, TmuxjailError, UsageError
from .net import policy as netpolicy
from .policycache import PolicyCache
from .record import Record
from .registry import Mode
from .request import StartRequest, check_env_name, mode_of
from .subpath import below

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

    from .plan import Plan

FORMAT = 1  # of the key and the entry: bump when either changes meaning
ENV_READ = ("TMUXJAIL_ALLOWED_MODES", "TMUXJAIL_NETWORK")  # what config.load reads of the environment
DEPENDENCIES = ("pydantic/__init__.py", "pydantic/version.py", "pydantic_core/__init__.py")
PACKAGES = host.PACKAGES  # what installed() walks


class WarmPlan(Record):
    """What a start needs of a resolution, cached or not."""

    policy: Policy
    fingerprint: str
    adapter: Adapter
    argv: list[str]  # how to start the CLI (interpreter first, for scripts)
    approval: dict | None  # the approval a verified run goes under
    hit: bool


def cacheable(opts: StartRequest) -> bool:
    return (opts.restriction is None and opts.candidate is None and opts.trace is None and not opts.dry_run
            and opts.backend in (None, "bwrap") and not hostos.darwin())


def resolve(ctx: Context, opts: StartRequest) -> WarmPlan:
    """The start's policy: from the cache when every input is unchanged, else resolved in full
    (and then remembered)."""
    adapter = get_adapter(opts.provider)
    check_env_name(opts.env_name)
    cfg, cfg_digest = load_config(ctx.paths.config_file)
    mode = mode_of(opts.mode, cfg)
    if opts.network is not None:
        config_mod.check_network(opts.network, "--network", UsageError)
    box = sandbox(cfg, mode)
    key = None
    if cacheable(opts):
        key = key_of(ctx, opts, mode, cfg_digest, box.backend.path, box.unguarded)
    if key is not None and (got := lookup(ctx, key, opts, mode, cfg, adapter)) is not None:
        return got
    return full(ctx, opts, mode, key, cfg_digest)


# -- the key -----------------------------------------------------------------------------------

def load_config(path: Path) -> tuple[Config, str]:
    """config.load, and the digest of the very bytes it parsed."""
    env_allowed, env_network = (os.environ.get(k) for k in ENV_READ)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return config_mod.parse("", "(defaults)", env_allowed, env_network), "absent"
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as read_text() reads it
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc}") from None
    return config_mod.parse(text, str(path), env_allowed, env_network), canon.sha256_hex(data)


def stat_key(path: str) -> list[int]:
    return list(identity.stat_key(os.stat(path)))


def installed() -> list[Any]:
    """tmuxjail's own files (code, adapters, profiles, catalogue) by stat identity, wherever each
    package lives (an editable install keeps adapters/ and profiles/ outside tmuxjail/)."""
    roots = sorted({os.path.dirname(str(import_module(m).__file__)) for m in PACKAGES})
    roots = [r for r in roots if not any(below(r, o) for o in roots)]
    out: list[Any] = []
    for root in roots:
        todo = [root]
        while todo:
            d = todo.pop()
            with os.scandir(d) as it:
                for e in sorted(it, key=lambda e: e.name):
                    if e.name == "__pycache__":
                        continue
                    st = e.stat(follow_symlinks=True)
                    if stat.S_ISDIR(st.st_mode):
                        todo.append(e.path)
                    else:
                        out.append([e.path, *identity.stat_key(st)])
    return out


def dependencies() -> list[Any]:
    """pydantic's files by stat identity, where this interpreter would import them from."""
    out: list[Any] = []
    for rel in DEPENDENCIES:
        for entry in sys.path:
            p = os.path.join(entry or ".", rel)
            try:
                out.append([p, *stat_key(p)])
                break
            except OSError:
                continue
        else:
            out.append([rel, None])
    return out


def inputs(ctx: Context, opts: StartRequest, mode: Mode, cfg_digest: str, bwrap_path: str, unguarded: bool) -> dict[str, Any]:
    """Every input of the policy that is not a host fact looked up again on a hit (record())."""
    p = ctx.paths
    pw = pwd.getpwuid(os.getuid())
    return {
        "format": FORMAT,
        "tmuxjail": [tmuxjail.__version__, installed()],
        "python": [sys.version, sys.executable, sys.prefix, dependencies()],
        "user": [os.getuid(), os.getgid(), sorted(os.getgroups()), pw.pw_name, pw.pw_dir, pw.pw_shell],
        "machine": os.uname().machine,
        "paths": [str(p.home), str(p.config_dir), str(p.state_dir), str(p.data_dir)],
        "config": [str(p.config_file), cfg_digest, {k: os.environ.get(k) for k in ENV_READ}],
        "PATH": ctx.env.get("PATH", os.defpath),
        "sandbox": [bwrap_path, unguarded],
        "user_limits": host.user_limits(),  # a jail's share of them is in the policy (budget.py)
        "request": {
            "provider": opts.provider, "mode": opts.mode, "resolved_mode": mode.value,
            "workspaces": list(opts.workspaces), "env_name": opts.env_name, "capabilities": list(opts.capabilities),
            "network": opts.network,
            "allow_domains": None if opts.allow_domains is None else list(opts.allow_domains),
            "backend": opts.backend,
            "worktree": [opts.worktree["gitdir"], opts.worktree["objects"]] if opts.worktree else None,
            "mcp": list(opts.mcp),
            # which login files the credentials store holds (`tmuxjail login` adds them)
            "credentials": [os.path.isfile(p.credentials(opts.provider) / rel)
                            for rel in get_adapter(opts.provider).credential_files],
        },
    }


def key_of(ctx: Context, opts: StartRequest, mode: Mode, cfg_digest: str, bwrap_path: str,
           unguarded: bool) -> str | None:
    """The digest of inputs(); None when one cannot be read (then nothing is cached)."""
    try:
        material = inputs(ctx, opts, mode, cfg_digest, bwrap_path, unguarded)
    except (OSError, KeyError):
        return None
    return canon.sha256_hex(canon.canonical_json(material).encode())


def _identity_now() -> tuple[list[Any], list[Any]] | None:
    try:
        return installed(), dependencies()
    except OSError:
        return None


# tmuxjail's files and pydantic as this process loaded them: a process older than the install
# (an orchestrator that imported tmuxjail.api before an upgrade) runs the old code and holds the
# profiles it loaded then, so what it resolves is not what a fresh start would.
_LOADED = _identity_now()


def loaded_is_installed() -> bool:
    now = _identity_now()
    return now is not None and now == _LOADED


# -- host facts --------------------------------------------------------------------------------

def record(ctx: Context, lookup: dict[str, Any], provider: str, mode: Mode, cfg: Config,
           workspaces: tuple[str, ...], adapter: Adapter) -> dict[str, Any] | None:
    """Today's host facts, gathered as plan.resolve gathers them (facts.gather); None when one
    cannot be (the full resolution then says why)."""
    try:
        now = facts.gather(ctx, provider, tuple(lookup["executables"]), lookup["declared"], mode, cfg, workspaces,
                           adapter)
        if now.guards.capped:
            return None
        return facts.record(now, [[f, *stat_key(f)] for f in facts.hashed_files(now)])
    except (TmuxjailError, OSError, KeyError, TypeError):
        return None


def resolved_record(ctx: Context, p: Plan) -> dict[str, Any] | None:
    """The host facts plan.resolve used, as record() writes them; None unless the executable's
    files are, now, the very ones it hashed (the digest cache holds their digest under today's
    stat identity)."""
    ident = p.policy.executable
    hashed = [(ident.path, ident.sha256), *ident.extra[:1]]
    stats = []
    for path, sha in hashed:
        try:
            key = stat_key(path)
        except OSError:
            return None
        if ctx.store.get_digest(path, tuple(key)) != sha:
            return None
        stats.append([path, *key])
    return facts.record(p.host, stats)


# -- hit and miss ------------------------------------------------------------------------------

def lookup(ctx: Context, key: str, opts: StartRequest, mode: Mode, cfg: Config,
           adapter: Adapter) -> WarmPlan | None:
    entry = PolicyCache(ctx.paths.state_dir).get(key)
    if entry is None:
        return None
    try:
        data, fp = entry["policy"], entry["fingerprint"]
        if not isinstance(data, dict) or canon.fingerprint(data) != fp:
            return None
        now = record(ctx, entry["lookup"], opts.provider, mode, cfg, opts.workspaces, adapter)
        if now is not None and data.get("mcp"):  # the servers' commands: where, and still that digest
            now["mcp"] = mcpconf.host_facts(data["mcp"], cfg.mcp)  # (the store stays closed: stat keys)
        if now is not None and now["stat"] != entry["record"].get("stat"):
            # A new CLI version (or a touched one): hashed in a thread while the full resolution loads.
            identity.hash_ahead([f for f, *_ in now["stat"]], ctx.store)
        if now is None or now != entry["record"]:
            return None
        approval = None
        if mode is Mode.verified:  # still approved today, exactly as plan.approval_for asks
            approval = approvals.find(ctx.store.approvals(opts.provider), opts.provider, entry["profile_hash"],
                                      data["executable"], entry["approval_items"])
            if approval is None:
                return None  # the full resolution refuses, and says what is missing
        pol = Policy.from_data(data)
        if pol.to_data() != data:  # not exactly what this version writes: its spec would not be its fingerprint's
            return None
        return WarmPlan(pol, fp, adapter, list(now["argv"]), approval, True)
    except (KeyError, TypeError, ValueError, AttributeError):  # an entry of another shape: a miss
        return None


def full(ctx: Context, opts: StartRequest, mode: Mode, key: str | None, cfg_digest: str) -> WarmPlan:
    """A miss: the full resolution, remembered under key (None: not cacheable)."""
    from . import plan, profiles  # pydantic and the profiles: only here

    p = plan.resolve(ctx, opts)
    out = WarmPlan(p.policy, p.fingerprint, p.adapter, list(p.resolved.argv), p.approval, False)
    if key is None:
        return out
    # Remembered only if no input changed while it ran, nor since this process loaded its code.
    rec = resolved_record(ctx, p)
    cfg, digest = load_config(ctx.paths.config_file)
    if rec is None or cfg_digest != digest:
        return out
    if p.policy.mcp:
        rec["mcp"] = mcpconf.host_facts([s._asdict() for s in p.policy.mcp], cfg.mcp, ctx.store.get_digest)
        if rec["mcp"] is None:
            return out
    if key != key_of(ctx, opts, mode, cfg_digest, p.backend.path, p.unguarded):
        return out
    if not loaded_is_installed():
        return out
    profile = profiles.load(opts.provider)
    data = p.policy.to_data()
    entry = {
        "format": FORMAT, "policy": data, "fingerprint": out.fingerprint,
        "lookup": {"executables": list(profile.executables), "declared": plan.declared_paths(profile, str(ctx.paths.home))},
        "record": rec, "profile_hash": profile.hash,
        "approval_items": list(netpolicy.approval_items(profile, data)),
    }
    PolicyCache(ctx.paths.state_dir).put(key, entry)
    return out
