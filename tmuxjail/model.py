"""What enters tmuxjail from outside (profiles, their capabilities and certification records), as
validated pydantic models. The policy resolved from them is plain data (effective.py)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .registry import Mode

__all__ = ["Capability", "CertificationRecord", "Mode", "PathGrant", "Profile"]

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
