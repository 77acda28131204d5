"""The data tmuxjail reasons about, as validated pydantic models. Depends only on the registry and
netcheck (both stdlib only)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from .net.check import check_patterns
from .registry import Mode

__all__ = ["Capability", "ExecutableIdentity", "Limits", "Mode", "PathGrant", "Policy", "Profile"]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CAP_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PathGrant(_Frozen):
    path: str = Field(description="absolute, or starting with ~/ for the user's home")
    access: Literal["ro", "rw"] = "ro"
    kind: Literal["dir", "file"] = "dir"
    optional: bool = False

    @field_validator("path")
    @classmethod
    def _path_shape(cls, v: str) -> str:
        if not (v.startswith(("/", "~/"))):
            raise ValueError("must be absolute or start with ~/")
        if "\x00" in v or any(part == ".." for part in v.split("/")):
            raise ValueError("must not contain '..' or NUL")
        return v


class Capability(_Frozen):
    id: str
    label: str = Field(min_length=1)
    description: str = ""
    paths: tuple[PathGrant, ...] = ()
    env: tuple[str, ...] = ()
    # Domain patterns the capability needs to reach through a proxied jail's proxy (netpolicy).
    network: tuple[str, ...] = ()
    unverified: bool = False

    @field_validator("id")
    @classmethod
    def _id_shape(cls, v: str) -> str:
        if not CAP_ID.match(v):
            raise ValueError("must be lowercase letters, digits, '.', '_' or '-'")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if not ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return v


Certification = Literal["certified", "documented-only", "stand-in-only", "failing", "uncertified"]


class CertificationRecord(_Frozen):
    """What certification found for a provider (profiles/<provider>.certified.json). Kept apart
    from the profile: recording a newly certified CLI version changes no policy and no approval."""

    certification: Certification = "uncertified"
    certified_versions: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


class Profile(_Frozen):
    provider: str
    profile_version: str = Field(min_length=1)
    display_name: str
    executables: tuple[str, ...] = Field(min_length=1)
    supported_versions: str = ""
    # The certification record, filled by the loader from its own file: never part of `hash`.
    certification: Certification = "uncertified"
    certified_versions: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    baseline: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    capabilities: dict[str, Capability] = {}
    hash: str = ""  # profiles.policy_hash(): what policies and approvals pin, filled by the loader


class ExecutableIdentity(_Frozen):
    path: str
    sha256: str
    version: str = "unknown"
    # Other files that decide what runs (a Node entry script's interpreter, ...): (path, sha256).
    extra: tuple[tuple[str, str], ...] = ()


# host: the host's network namespace; none: a namespace of its own with only its loopback;
# proxy: a namespace of its own whose only way out is the session's egress proxy (netproxy).
Network = Literal["host", "none", "proxy"]


class Limits(_Frozen):
    """Resource limits of a jail (defaults here, overridable in the operator config)."""

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


class Policy(_Frozen):
    """The immutable effective policy of one session. Its fingerprint is sha256 of its canonical
    JSON; any change to a field changes the fingerprint and refuses a resume."""

    schema_version: int = 1
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
    # proxy only: the domain patterns the proxy allows (netcheck.check_pattern; "*" = every public
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

    @field_validator("allow_domains")
    @classmethod
    def _patterns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_patterns(v, "allow_domains")

    @model_validator(mode="after")
    def _proxy_only(self) -> Policy:
        if self.network != "proxy" and (self.allow_domains or self.resolve):
            raise ValueError("allow_domains and resolve apply to network proxy only")
        return self

    @model_serializer(mode="wrap")
    def _drop_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent when empty: the fingerprints of host and none sessions (and of every mode but
        # verified, for the state guards) stay what they were.
        data: dict[str, Any] = handler(self)
        for key in ("allow_domains", "resolve", "state_guards", "state_copies", "state_audit"):
            if not data.get(key):
                data.pop(key, None)
        return data
