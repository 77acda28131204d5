"""Operator config (TOML) and the modes it allows. A request can narrow, never widen."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

from .errors import ConfigError, TmuxjailError
from .mcpconf import Server
from .mcpconf import parse as parse_mcp
from .net.check import check_name
from .net.policy import ANY, allowlist, check_pattern, normalize
from .record import Record
from .registry import MODES, PROVIDERS, Mode

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

KEYS = {"default_mode", "allowed_modes", "allow_unguarded_compatibility", "providers", "accept_missing_guards",
        "limits", "network", "discover", "worktree", "mcp"}
# [discover] trace_cap: bytes of strace output a discovery run may write before it is stopped. A
# plain start of a CLI writes a few MB; strace writes ~110 MB/s for a CLI that floods it on purpose.
TRACE_CAP = 256 << 20
TRACE_CAP_MIN = 1 << 20
# [limits] key -> (effective.Limits field, smallest value accepted)
LIMITS = {"tmp": ("tmp_bytes", 1 << 20), "run": ("run_bytes", 1 << 20), "home": ("home_bytes", 1 << 20),
          "nproc": ("nproc", 16), "nofile": ("nofile", 64)}
COUNTS = ("nproc", "nofile")  # plain counts, no size units
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
NETWORKS = ("none", "proxy", "host")  # narrowest first
# Compatibility keeps the host's network; strict modes go out only through the session's
# allowlisting proxy (README, "Network policy"). Per mode, this is also the widest a request may ask.
DEFAULT_NETWORK = {"compatibility": "host", "isolated": "proxy", "verified": "proxy"}


def check_network(value: object, where: str, error: type[TmuxjailError] = ConfigError) -> str:
    """A network setting, or a one-line error (exit 2)."""
    if value not in NETWORKS:
        raise error(f"{where}: network must be host, proxy or none")
    return str(value)


def narrower(a: str, b: str) -> str:
    return a if NETWORKS.index(a) <= NETWORKS.index(b) else b


def network_fix(mode: str, want: str, config_file: str, env_network: str | None) -> str:
    """What lets a session of `mode` have network `want`: the exact config line (it is both the
    default there and the widest a request may ask), or dropping the environment's narrowing."""
    env = (env_network or "").strip()
    if env in NETWORKS and NETWORKS.index(env) < NETWORKS.index(want):
        return f"TMUXJAIL_NETWORK={env} narrows every mode: unset it"
    return (f'add `{mode} = "{want}"` under [network] in {config_file} '
            f"(the widest network {mode} sessions may ask, and their default)")


def restore_network(mode: str, old: dict[str, Any], request: dict[str, Any], cfg: Config, config_file: str,
                    profile_domains: tuple[str, ...] = ()) -> list[str] | None:
    """The steps that give a session of `mode` its recorded network back (old: its recorded
    policy; request: its recorded request; cfg: today's config without TMUXJAIL_NETWORK), each
    one a change that works: the allow list is checked by computing it as a resume would. None
    when no config change restores it (the profile's own domains changed, say)."""
    steps = []
    old_net = str(old.get("network", "host"))
    env = (os.environ.get("TMUXJAIL_NETWORK") or "").strip()
    want = request.get("network") or old_net
    if env in NETWORKS and NETWORKS.index(env) < NETWORKS.index(want):
        steps.append(f"TMUXJAIL_NETWORK={env} narrows every mode: unset it")
    today = cfg.network[mode]
    if (request.get("network") is None and today != old_net) or NETWORKS.index(today) < NETWORKS.index(want):
        steps.append(network_fix(mode, old_net, config_file, None))
    if old_net != "proxy":
        return steps
    old_allow = tuple(old.get("allow_domains", ()))
    asked = tuple(request.get("allow_domains") or ())

    def gives(ceiling: tuple[str, ...]) -> bool:
        try:
            return allowlist(mode, "proxy", asked, profile_domains, ceiling) == old_allow
        except TmuxjailError:
            return False

    if not gives(cfg.allow_domains[mode]):
        for ceiling in (normalize((*cfg.allow_domains[mode], *old_allow)), old_allow):
            if gives(ceiling):
                steps.append(f"under [network.allow_domains] in {config_file} set `{mode} = {_toml_list(ceiling)}`")
                break
        else:
            return None
    resolve = [tuple(x) for x in old.get("resolve", ())]
    if resolve != [tuple(x) for x in cfg.resolve]:
        lines = [f'"{n}" = ' + (f'{{ address = "{a}", test_upstream = true }}' if t else f'"{a}"') for n, a, t in resolve]
        steps.append(f"replace [network.resolve] in {config_file} with: " + " ".join(f"`{x}`" for x in lines)
                     if lines else f"remove [network.resolve] from {config_file}")
    return steps


def _toml_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


class Config(Record):
    """(A NamedTuple, not a dataclass: a start would import dataclasses, inspect and ast for it.
    parse() gives every instance its own tables; the defaults are shared and never changed.)"""

    default_mode: Mode = Mode.compatibility
    allowed_modes: tuple[str, ...] = MODES
    allow_unguarded_compatibility: bool = False
    executables: dict[str, str] = {}  # noqa: RUF012 - read only
    credentials: tuple[str, ...] = ()  # providers whose strict sessions get their stored login
    accept_missing_guards: tuple[str, ...] = ()
    source: str = "(defaults)"
    limits: dict[str, Any] = {}  # noqa: RUF012 - overrides of effective.Limits, by field name; read only
    # mode -> the network a session gets when the request names none, and the widest it may ask.
    network: dict[str, str] = dict(DEFAULT_NETWORK)  # noqa: RUF012 - read only
    # [network.resolve]: (name, address, test_upstream), sorted; see _resolve_table.
    resolve: tuple[tuple[str, str, bool], ...] = ()
    # mode -> the widest domain patterns a proxied jail of that mode may reach (netpolicy).
    allow_domains: dict[str, tuple[str, ...]] = dict.fromkeys(MODES, (ANY,))
    env_network: str | None = None  # TMUXJAIL_NETWORK as given (it narrowed `network`)
    trace_cap: int = TRACE_CAP  # [discover] trace_cap
    # [worktree] root (None: beside the repository, REPO.worktrees/) and branch_prefix (docs/worktrees.md)
    worktree_root: str | None = None
    branch_prefix: str = "tmuxjail/"
    mcp: dict[str, Server] = {}  # noqa: RUF012 - [mcp.NAME]: the operator's MCP servers (mcpconf); read only


def _size(value: object) -> int | None:
    """Bytes, or "16M"/"1G"; None when it is not a whole non-negative size."""
    if isinstance(value, str):
        num, unit = value[:-1], value[-1:].upper()
        if unit not in _UNITS or unit == "":
            num, unit = value, ""
        return int(num) * _UNITS[unit] if num.isdigit() else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _discover(raw: object, source: str) -> int:
    """[discover] trace_cap = bytes or "256M": where a discovery run's trace stops it."""
    if not isinstance(raw, dict) or set(raw) - {"trace_cap"}:
        raise ConfigError(f"{source}: discover: must be a table with trace_cap")
    n = _size(raw.get("trace_cap", TRACE_CAP))
    if n is None or n < TRACE_CAP_MIN:
        raise ConfigError(f"{source}: discover.trace_cap: must be a whole number of at least {TRACE_CAP_MIN} "
                          'bytes (or "256M", "1G")')
    return n


def _worktree(raw: object, source: str) -> tuple[str | None, str]:
    """[worktree] root = an absolute directory (or ~/...); branch_prefix = "tmuxjail/"."""
    if not isinstance(raw, dict) or set(raw) - {"root", "branch_prefix"}:
        raise ConfigError(f"{source}: worktree: only 'root' and 'branch_prefix' may be set")
    root = raw.get("root")
    if root is not None and (not isinstance(root, str) or not root.startswith(("/", "~/")) or not root.isprintable()):
        raise ConfigError(f"{source}: worktree.root: must be an absolute path (or ~/...)")
    prefix = raw.get("branch_prefix", "tmuxjail/")
    if not isinstance(prefix, str) or not re.fullmatch(r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,40}/){1,3}", prefix) \
            or ".." in prefix or ".lock/" in prefix:
        raise ConfigError(f"{source}: worktree.branch_prefix: must be like \"tmuxjail/\" (words of letters, "
                          "digits, '.', '_' or '-', each ending in '/')")
    return root, prefix


def _limits(raw: object, source: str) -> dict[str, Any]:
    """[limits] tmp/run/home = bytes or "16M"/"1G"; nproc, nofile = counts (each also bounded by
    the share of the user's own limit: budget.py); share = the fraction of each per-user count a
    jail may take, 0 < share < 1."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: limits: must be a table")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "share":
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise ConfigError(f"{source}: limits.share: must be a fraction between 0 and 1 (e.g. 0.25), "
                                  "the part of each of your per-user limits one jail may take")
            out["share"] = float(value)
            continue
        if key not in LIMITS:
            raise ConfigError(f"{source}: limits.{key}: unknown (known: {', '.join([*LIMITS, 'share'])})")
        name, least = LIMITS[key]
        n = value
        if isinstance(value, str) and key not in COUNTS:
            num, unit = value[:-1], value[-1:].upper()
            if unit not in _UNITS or unit == "":
                num, unit = value, ""
            n = int(num) * _UNITS[unit] if num.isdigit() else None
        if not isinstance(n, int) or isinstance(n, bool) or n < least:
            raise ConfigError(f"{source}: limits.{key}: must be a whole number of at least {least}"
                             + ("" if key in COUNTS else ' bytes (or "16M", "1G")'))
        out[name] = n
    return out


def _resolve_table(raw: object, source: str) -> tuple[tuple[str, str, bool], ...]:
    """[network.resolve]: names the proxy resolves without DNS, for tests and local mirrors:
        "mirror.example" = "203.0.113.7"                                  # still range-checked
        "upstream.test" = { address = "127.0.0.1", test_upstream = true }  # exempt, see netproxy
    Read from the operator's config file only: the environment and workspaces cannot set it, and
    no jail can write the config (read-only in compatibility jails, hidden in strict ones)."""
    where = f"{source}: network.resolve"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table of \"name\" = \"address\"")
    out = []
    for name, value in raw.items():
        entry = value if isinstance(value, dict) else {"address": value}
        if set(entry) - {"address", "test_upstream"} or not isinstance(entry.get("test_upstream", False), bool):
            raise ConfigError(f"{where}.{name}: must be \"address\" or {{ address = ..., test_upstream = true }}")
        try:
            host = check_name(name)
            addr = str(ipaddress.ip_address(entry.get("address")))  # type: ignore[arg-type]
        except ValueError as exc:
            raise ConfigError(f"{where}.{name}: {exc}") from None
        out.append((host, addr, entry.get("test_upstream", False)))
    return tuple(sorted(out))


def _allow_domains(raw: object, source: str) -> dict[str, tuple[str, ...]]:
    where = f"{source}: network.allow_domains"
    if not isinstance(raw, dict) or set(raw) - set(MODES):
        raise ConfigError(f"{where}: must be a table of mode = [domain patterns]")
    out = {}
    for m in MODES:
        value = raw.get(m, [ANY])
        if not isinstance(value, list):
            raise ConfigError(f"{where}.{m}: must be a list of domain patterns")
        out[m] = tuple(check_pattern(p, f"{where}.{m}", ConfigError) for p in value)
    return out


def _network(raw: object, source: str, env_network: str | None) -> dict[str, str]:
    if not isinstance(raw, dict) or set(raw) - {*MODES, "resolve", "allow_domains"}:
        raise ConfigError(f"{source}: network: must be a table of mode = \"host\", \"proxy\" or \"none\"")
    out = {m: check_network(raw.get(m, DEFAULT_NETWORK[m]), f"{source}: network.{m}") for m in MODES}
    if env_network:
        narrow = check_network(env_network.strip(), "TMUXJAIL_NETWORK")
        out = {m: narrower(v, narrow) for m, v in out.items()}  # can only narrow
    return out


def _toml(text: str, source: str) -> dict[str, Any]:
    import tomllib  # ~2 ms of imports a start without a config file does not pay

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None


def parse(text: str, source: str, env_allowed: str | None = None, env_network: str | None = None) -> Config:
    """Pure: config text (+ TMUXJAIL_ALLOWED_MODES, TMUXJAIL_NETWORK) -> Config, or a one-line
    UsageError."""
    raw = _toml(text, source) if text else {}  # no config file: tomllib is not even loaded
    unknown = set(raw) - KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown key {min(unknown)!r}")
    allowed = raw.get("allowed_modes", list(MODES))
    if not isinstance(allowed, list) or not allowed or any(m not in MODES for m in allowed):
        raise ConfigError(f"{source}: allowed_modes: must be a non-empty list of {', '.join(MODES)}")
    if env_allowed:
        narrowed = [m.strip() for m in env_allowed.split(",") if m.strip()]
        if any(m not in MODES for m in narrowed):
            raise ConfigError(f"TMUXJAIL_ALLOWED_MODES: must be a comma list of {', '.join(MODES)}")
        allowed = [m for m in allowed if m in narrowed]  # can only narrow
        if not allowed:
            raise ConfigError("TMUXJAIL_ALLOWED_MODES leaves no allowed mode")
    default = raw.get("default_mode", Mode.compatibility)
    if default not in MODES:
        raise ConfigError(f"{source}: default_mode: must be one of {', '.join(MODES)}")
    listed = raw.get("allowed_modes", list(MODES))
    if default not in listed:
        if "default_mode" in raw:  # said both ways: which one is meant is the operator's call
            raise ConfigError(f"{source}: default_mode {default!r} is not in allowed_modes {listed}",
                              hint=f'set default_mode to one of {", ".join(listed)}, or add "{default}" to allowed_modes')
        default = next(m for m in MODES if m in listed)  # unset: the first mode the list allows
    unguarded = raw.get("allow_unguarded_compatibility", False)
    if not isinstance(unguarded, bool):
        raise ConfigError(f"{source}: allow_unguarded_compatibility: must be true or false")
    accept = raw.get("accept_missing_guards", [])
    if not isinstance(accept, list) or any(not isinstance(x, str) for x in accept):
        raise ConfigError(f"{source}: accept_missing_guards: must be a list of guard names")
    executables: dict[str, str] = {}
    credentials: list[str] = []
    providers = raw.get("providers", {})
    if not isinstance(providers, dict):
        raise ConfigError(f"{source}: providers: must be a table")
    for name, body in providers.items():
        if name not in PROVIDERS:
            raise ConfigError(f"{source}: providers.{name}: unknown provider (known: {', '.join(PROVIDERS)})")
        if not isinstance(body, dict) or set(body) - {"executable", "credentials"}:
            raise ConfigError(f"{source}: providers.{name}: only 'executable' and 'credentials' may be set")
        creds = body.get("credentials", False)
        if not isinstance(creds, bool):
            raise ConfigError(f"{source}: providers.{name}.credentials: must be true or false (true: strict sessions "
                              "get the login `tmuxjail login` kept)")
        if creds:
            credentials.append(name)
        exe = body.get("executable")
        if exe is not None:
            if not isinstance(exe, str) or not (exe.startswith(("/", "~/"))):
                raise ConfigError(f"{source}: providers.{name}.executable: must be an absolute path")
            executables[name] = exe
    limits = _limits(raw.get("limits", {}), source)
    network = _network(raw.get("network", {}), source, env_network)
    allow_domains = _allow_domains(raw.get("network", {}).get("allow_domains", {}), source)
    worktree = _worktree(raw.get("worktree", {}), source)
    return Config(
        limits=limits,
        network=network,
        resolve=_resolve_table(raw.get("network", {}).get("resolve", {}), source),
        allow_domains=allow_domains,
        default_mode=Mode(default),
        allowed_modes=tuple(m for m in MODES if m in allowed),
        allow_unguarded_compatibility=unguarded,
        executables=executables,
        credentials=tuple(sorted(credentials)),
        accept_missing_guards=tuple(accept),
        source=source,
        env_network=env_network or None,
        trace_cap=_discover(raw.get("discover", {}), source),
        worktree_root=worktree[0],
        branch_prefix=worktree[1],
        mcp=parse_mcp(raw["mcp"], source, os.path.expanduser("~")) if "mcp" in raw else {},
    )


def load(path: Path, env_network_applies: bool = True) -> Config:
    """The config; env_network_applies=False: as if TMUXJAIL_NETWORK were unset (resume's hints)."""
    env_allowed = os.environ.get("TMUXJAIL_ALLOWED_MODES")
    env_network = os.environ.get("TMUXJAIL_NETWORK") if env_network_applies else None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return parse("", "(defaults)", env_allowed, env_network)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config: {getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, str(path), env_allowed, env_network)
