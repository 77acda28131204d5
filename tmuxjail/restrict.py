"""Restriction files: a workflow may narrow the user policy, never widen it. Pure.

    allowed_modes = ["verified"]           # a subset of the operator's allowed modes
    capabilities  = ["git-identity"]       # the optional capabilities a run may ask for
    workspaces    = ["~/src/app"]          # every workspace must lie inside one of these
    env_names     = ["OPENAI_API_KEY"]     # a subset of the names the profile would pass

A field that would widen (a mode the operator does not allow, a capability or variable the profile
does not have) is an error naming the field, never ignored. Restriction files are read only when
passed explicitly with --restrict; one lying in a workspace is never policy by itself."""

from __future__ import annotations

import os
from collections.abc import Callable

from .errors import NotApproved, UsageError
from .registry import Mode
from .subpath import inside

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

FIELDS = ("allowed_modes", "capabilities", "workspaces", "env_names")


def parse(text: str, source: str) -> dict[str, Any]:
    """TOML text -> a normalised restriction dict (lists sorted), or a one-line UsageError."""
    import tomllib  # only with --restrict: every start imports this module

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{source}: not valid TOML: {exc}") from None
    out: dict[str, list[str]] = {}
    for key, value in raw.items():
        if key not in FIELDS:
            raise UsageError(f"{source}: {key}: not a restriction field (allowed: {', '.join(FIELDS)})")
        if not isinstance(value, list) or any(not isinstance(v, str) or not v for v in value):
            raise UsageError(f"{source}: {key}: must be a list of strings")
        out[key] = sorted(set(value))
    return out


def load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the restriction file: {getattr(exc, 'strerror', None) or exc}") from None
    return parse(text, path)


def from_file(path: str | None) -> dict[str, Any] | None:
    """--restrict FILE as a request carries it: its absolute path and its rules."""
    if not path:
        return None
    return {"source": os.path.abspath(path), "rules": load(path)}


def apply(restriction: dict[str, Any], *, source: str, home: str, allowed_modes: tuple[str, ...], mode: Mode,
          optional_caps: tuple[str, ...], requested_caps: tuple[str, ...], workspaces: tuple[str, ...],
          env_names: tuple[str, ...], realpath: Callable[[str], str] = os.path.realpath) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Check a request against a restriction. Returns (allowed modes, env names), both narrowed.
    Widening fields raise UsageError (exit 2); a request outside the narrowed policy raises
    NotApproved (exit 4)."""
    modes = tuple(allowed_modes)
    if "allowed_modes" in restriction:
        extra = [m for m in restriction["allowed_modes"] if m not in allowed_modes]
        if extra:
            raise UsageError(f"{source}: allowed_modes: {extra[0]} is not allowed by the operator; a restriction cannot widen")
        modes = tuple(m for m in allowed_modes if m in restriction["allowed_modes"])
    if mode not in modes:
        raise NotApproved(f"mode {mode} is not allowed by {source}", hint="allowed: " + ", ".join(modes))
    if "capabilities" in restriction:
        unknown = [c for c in restriction["capabilities"] if c not in optional_caps]
        if unknown:
            raise UsageError(f"{source}: capabilities: {unknown[0]} is not an optional capability of this profile")
        denied = [c for c in requested_caps if c not in restriction["capabilities"]]
        if denied:
            raise NotApproved(f"capability {denied[0]} is not allowed by {source}")
    if "workspaces" in restriction:
        roots = [realpath(home + r[1:] if r.startswith("~/") else r) for r in restriction["workspaces"]]
        if any(not os.path.isabs(r) for r in roots):
            raise UsageError(f"{source}: workspaces: paths must be absolute or start with ~/")
        for ws in workspaces:
            if not any(inside(ws, r) for r in roots):
                raise NotApproved(f"workspace {ws} is outside the workspaces allowed by {source}")
    names = tuple(env_names)
    if "env_names" in restriction:
        extra = [n for n in restriction["env_names"] if n not in env_names]
        if extra:
            raise UsageError(f"{source}: env_names: {extra[0]} is not a variable this policy would pass; a restriction cannot widen")
        names = tuple(n for n in env_names if n in restriction["env_names"])
    return modes, names
