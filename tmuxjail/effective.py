"""The effective policy of one session, as plain data: built by the resolver (policy.py) from
validated inputs, and from its stored JSON form by the warm start (warm.py) and resume. Stdlib
only, and NamedTuples rather than dataclasses (whose import, ~6 ms, would land on every warm
start). Its JSON form is what every fingerprint was computed from: to_data() must keep it exactly
(tests/unit/test_policy_form.py pins it)."""

from __future__ import annotations

from .net.check import check_patterns
from .record import Record
from .registry import Mode
from .subpath import below

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any, Literal

GIT_WRITE = "git-metadata-write"

# host: the host's network namespace; none: a namespace of its own with only its loopback;
# proxy: a namespace of its own whose only way out is the session's egress proxy (netproxy).
if TYPE_CHECKING:
    Network = Literal["host", "none", "proxy"]
SCHEMA = 1  # Policy.schema_version
# Absent from the JSON form when empty: the fingerprints of host and none sessions (and of every
# mode but verified, for the state guards) stay what they were before these fields existed.
# Where a worktree session's git directory and the repository's objects are in its jail: paths
# under the jail's own /run, which do not exist on the host (docs/worktrees.md).
JAIL_GITDIR = "/run/tmuxjail/worktree/git"
JAIL_OBJECTS = "/run/tmuxjail/worktree/objects"
DROPPED_EMPTY = ("allow_domains", "resolve", "state_guards", "state_copies", "state_audit", "worktree", "mcp",
                 "mcp_stub", "credentials")


def never_passed(name: str) -> bool:
    """Names no jail ever receives, in any mode: they point back at tmux or at tmuxjail."""
    return name.startswith("TMUX")


class ExecutableIdentity(Record):
    path: str
    sha256: str
    version: str = "unknown"
    # Other files that decide what runs (a Node entry script's interpreter, ...): (path, sha256).
    extra: tuple[tuple[str, str], ...] = ()

    def to_data(self) -> dict[str, Any]:
        out: dict[str, Any] = _json(self)
        return out

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ExecutableIdentity:
        return cls(str(data["path"]), str(data["sha256"]), str(data.get("version", "unknown")),
                   tuple((str(p), str(h)) for p, h in data.get("extra", ())))


class McpServer(Record):
    """An MCP server attached to a session (mcpconf.Server as the config declared it, plus the
    digest of its command): the broker runs exactly this, outside the jail (net/broker.py)."""

    name: str
    command: str
    sha256: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()  # names only: the values travel in the spec, never in a policy
    env_file: str | None = None
    network: str = "host"
    read: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None  # None: every tool the server lists
    run: str = "host"  # "jail": in the agent's jail, the CLI's own child (no broker, no env, no tools)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> McpServer:
        tools = data.get("tools")
        return cls(str(data["name"]), str(data["command"]), str(data["sha256"]),
                   tuple(str(a) for a in data.get("args", ())), tuple(str(n) for n in data.get("env", ())),
                   None if data.get("env_file") is None else str(data["env_file"]), str(data.get("network", "host")),
                   tuple(str(p) for p in data.get("read", ())),
                   None if tools is None else tuple(str(t) for t in tools), str(data.get("run", "host")))


class Limits(Record):
    """Resource limits of a jail: these defaults, the operator config's [limits] (validated by
    config.py) over them, bounded at start by the user's real limits (budget.py)."""

    tmp_bytes: int = 1 << 30  # each of /tmp, /var/tmp, /dev/shm
    run_bytes: int = 64 << 20  # /run
    home_bytes: int = 1 << 30  # the tmpfs home of verified mode
    # The jail's share of each per-user kernel count (budget.py, docs/resources.md): the fraction
    # of the user's own limit it may take; the rest stays the user's. In a policy, the fields
    # below are the values computed at start from the real limits (-1: the user has none).
    share: float = 0.25
    nproc: int = 1024  # processes and threads (RLIMIT_NPROC; a pids cgroup for root); at most this
    nofile: int = 65536  # open files per process (RLIMIT_NOFILE); nproc x nofile within the share of fs.file-max
    sigpending: int = -1  # RLIMIT_SIGPENDING (queued signals, per user)
    msgqueue: int = -1  # RLIMIT_MSGQUEUE (bytes of POSIX message queues, per user)
    memlock: int = -1  # RLIMIT_MEMLOCK (locked shared memory, per user)
    ptys: int = -1  # ptys of the jail's own devpts (max=)
    # /proc/sys/user/<name> = value in the jail's own user namespace (inotify, fanotify, namespaces)
    user: tuple[tuple[str, int], ...] = ()
    memory: str = "none"  # no mechanism used yet: see `tmuxjail doctor`

    def to_data(self) -> dict[str, Any]:
        out: dict[str, Any] = _json(self)
        return out

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Limits:
        return cls(**{**data, "user": tuple((str(n), int(v)) for n, v in data.get("user", ()))})


class Policy(Record):
    """The immutable effective policy of one session. Its fingerprint is sha256 of its canonical
    JSON form (to_data); any change to a field changes the fingerprint and refuses a resume. Built
    by policy.resolve and by from_data, both through checked()."""

    schema_version: int  # SCHEMA
    mode: Mode
    provider: str
    backend: str
    profile_version: str
    profile_hash: str
    executable: ExecutableIdentity
    install_roots: tuple[str, ...]
    home: str
    private_home: str | None
    workspace_read: tuple[str, ...]
    workspace_write: tuple[str, ...]
    host_read: tuple[str, ...]
    host_write: tuple[str, ...]
    protected: tuple[str, ...]
    hidden: tuple[str, ...]
    env_inherit: bool
    env_names: tuple[str, ...]
    env_set: tuple[tuple[str, str], ...]
    capabilities: tuple[str, ...]
    network: Network = "host"
    # proxy only: the domain patterns the proxy allows (net.check.check_pattern; "*" = every public
    # destination), normalised and sorted.
    allow_domains: tuple[str, ...] = ()
    # proxy only: the operator config's [network.resolve] (name, address, test_upstream): names the
    # proxy resolves without DNS. Only the config file sets it (never the environment or a workspace).
    resolve: tuple[tuple[str, str, bool], ...] = ()
    limits: Limits = Limits()
    # verified only: the CLI's command files inside the state bound back writable
    # (adapters' state_guards), bound read-only onto themselves; and (host path, the jail's private
    # copy bound over it) for its state_copies (docs/provider-state.md).
    state_guards: tuple[str, ...] = ()
    state_copies: tuple[tuple[str, str], ...] = ()
    state_audit: tuple[str, ...] = ()  # ... and those the audit names when changed (stateaudit.py)
    # --worktree: (the agent's git directory, the user's object store), bound writable and read-only
    # at worktree.JAIL_GITDIR and JAIL_OBJECTS (docs/worktrees.md); strict modes under bwrap only.
    worktree: tuple[str, ...] = ()
    # --mcp: the operator's MCP servers this session's broker runs (strict modes under bwrap only),
    # and the interpreter inside the jail that runs the stub the CLI starts for each (net/stub.py).
    mcp: tuple[McpServer, ...] = ()
    mcp_stub: str = ""
    # (a file of the credentials store, where the CLI reads it in the jail's home): `tmuxjail
    # login`'s files, bound writable one by one (a refreshed token reaches the store), strict only.
    credentials: tuple[tuple[str, str], ...] = ()

    def checked(self) -> Policy:
        """This policy with its invariants checked (ValueError if one does not hold)."""
        if self.network not in ("host", "none", "proxy"):
            raise ValueError(f"network {self.network!r}: must be host, none or proxy")
        if self.network != "proxy" and (self.allow_domains or self.resolve):
            raise ValueError("allow_domains and resolve apply to network proxy only")
        if self.worktree and (len(self.worktree) != 2 or not self.mode.strict
                              or not all(p.startswith("/") for p in self.worktree)):
            raise ValueError("worktree: (git directory, object store), absolute, in a strict mode only")
        if self.mcp and (not self.mode.strict or not self.mcp_stub.startswith("/")
                         or not all(s.command.startswith("/") for s in self.mcp)):
            raise ValueError("mcp: absolute commands and stub, in a strict mode only")
        if any(s.run not in ("host", "jail") or (s.run == "jail" and (s.env or s.env_file or s.tools is not None))
               for s in self.mcp):
            raise ValueError("mcp: run is host or jail, and a server in the jail has no env, env_file or tools")
        if self.credentials and (not self.mode.strict or not all(
                s.startswith("/") and below(d, self.home) for s, d in self.credentials)):
            raise ValueError("credentials: store files bound below the home, in a strict mode only")
        return self._replace(allow_domains=check_patterns(self.allow_domains, "allow_domains"))

    def to_data(self) -> dict[str, Any]:
        """The JSON form: what the store, the spec, the cache and the sandbox builders hold."""
        data: dict[str, Any] = _json(self)
        for key in DROPPED_EMPTY:
            if not data[key]:
                del data[key]
        for server in data.get("mcp", ()):
            if server["run"] == "host":  # (the policies made before run = "jail" keep their fingerprints)
                del server["run"]
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Policy:
        """A policy from its JSON form (a KeyError, TypeError or ValueError if it is not one)."""
        def strs(key: str) -> tuple[str, ...]:
            return tuple(str(v) for v in data.get(key, ()))

        return cls(
            schema_version=int(data["schema_version"]), mode=Mode(data["mode"]), provider=str(data["provider"]),
            backend=str(data["backend"]), profile_version=str(data["profile_version"]),
            profile_hash=str(data["profile_hash"]), executable=ExecutableIdentity.from_data(data["executable"]),
            install_roots=strs("install_roots"), home=str(data["home"]), private_home=data["private_home"],
            workspace_read=strs("workspace_read"), workspace_write=strs("workspace_write"),
            host_read=strs("host_read"), host_write=strs("host_write"), protected=strs("protected"),
            hidden=strs("hidden"), env_inherit=bool(data["env_inherit"]), env_names=strs("env_names"),
            env_set=tuple((str(k), str(v)) for k, v in data["env_set"]), capabilities=strs("capabilities"),
            network=data.get("network", "host"), allow_domains=strs("allow_domains"),
            resolve=tuple((str(n), str(a), bool(t)) for n, a, t in data.get("resolve", ())),
            limits=Limits.from_data(data.get("limits", {})), state_guards=strs("state_guards"),
            state_copies=tuple((str(h), str(c)) for h, c in data.get("state_copies", ())),
            state_audit=strs("state_audit"), worktree=strs("worktree"),
            mcp=tuple(McpServer.from_data(m) for m in data.get("mcp", ())), mcp_stub=str(data.get("mcp_stub", "")),
            credentials=tuple((str(s), str(d)) for s, d in data.get("credentials", ())),
        ).checked()


def _json(value: Any) -> Any:
    if isinstance(value, Mode):
        return value.value
    if isinstance(value, tuple):
        if hasattr(value, "_asdict"):
            return {k: _json(v) for k, v in value._asdict().items()}
        return [_json(v) for v in value]
    return value


def __getattr__(name: str) -> Any:
    """`Network` at run time, for the one reader that needs the type itself: the pydantic model
    (policy.py), which validates with it; the warm path never asks, so never imports typing."""
    if name == "Network":
        from typing import Literal

        return Literal["host", "none", "proxy"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
