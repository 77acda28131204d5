"""Load and validate provider profiles (versioned TOML data shipped inside the package).

Profiles are only ever read from the installed package: a profile or restriction file inside a
workspace is never policy."""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from pydantic import ValidationError

from .canon import fingerprint
from .errors import UsageError
from .model import Capability, CertificationRecord, Profile
from .net.policy import check_pattern

SHARED = "capabilities.toml"
# The certification record: kept in <provider>.certified.json, outside the policy hash.
RECORD_FIELDS = frozenset(CertificationRecord.model_fields)


def _read(name: str) -> bytes:
    try:
        return resources.files("tmuxjail.profile_data").joinpath(name).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no profile file {name} in the installed package") from None


def policy_hash(profile: Profile) -> str:
    """What policies and approvals pin of a profile: a canonical form of everything in it (its
    capabilities resolved through the shared catalogue) except its certification record. A field
    added to Profile is policy unless it is part of that record."""
    return fingerprint(profile.model_dump(mode="json", exclude={*RECORD_FIELDS, "hash"}))


def validation_message(where: str, exc: Exception) -> str:
    """One line naming the file, the key and the problem of a pydantic or TOML error."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        key = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
        return f"{where}: {key}: {first.get('msg', 'invalid')}"
    return f"{where}: {exc}"


def parse_profile(name: str, data: bytes, shared: dict[str, Capability],
                  record: CertificationRecord | None = None, *, inline_record: bool = False) -> Profile:
    """Pure: bytes of one profile file (+ the shared catalogue, + its certification record) -> a
    validated Profile whose hash covers the policy it defines and nothing else. A shipped profile
    keeps its record in its own file; a generated one (a discovery candidate) may carry it inline
    (inline_record), where it is read as the record: outside the hash either way."""
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{name}: not valid TOML: {exc}") from None
    misplaced = sorted(RECORD_FIELDS & set(raw))
    if misplaced and inline_record and record is None:
        record = _record_of(name, {k: raw.pop(k) for k in misplaced})
    elif misplaced:
        raise UsageError(f"{name}: {misplaced[0]}: belongs in the certification record "
                         f"({name.removesuffix('.toml')}.certified.json), outside the profile's hash")
    caps = raw.get("capabilities", {})
    if not isinstance(caps, dict):
        raise UsageError(f"{name}: capabilities: must be a table")
    try:
        raw["capabilities"] = {cid: {"id": cid, **body} for cid, body in caps.items()}
        profile = Profile.model_validate(raw)
    except (ValidationError, TypeError) as exc:
        raise UsageError(validation_message(name, exc)) from None
    _check_network(name, profile.capabilities.values())
    known = {**shared, **profile.capabilities}
    for field in ("baseline", "optional"):
        for cid in getattr(profile, field):
            if cid not in known:
                raise UsageError(f"{name}: {field}: unknown capability {cid!r}")
    # The hash covers the shared capabilities this profile uses: changing what "Use Git identity"
    # maps to must invalidate every approval that relied on it.
    merged = {cid: known[cid] for cid in (*profile.baseline, *profile.optional)}
    profile = profile.model_copy(update={"capabilities": merged, **(record.model_dump() if record else {})})
    return profile.model_copy(update={"hash": policy_hash(profile)})


def _record_of(name: str, raw: object) -> CertificationRecord:
    try:
        return CertificationRecord.model_validate(raw)
    except ValidationError as exc:
        raise UsageError(validation_message(name, exc)) from None


def parse_record(name: str, data: bytes) -> CertificationRecord:
    """Pure: bytes of a <provider>.certified.json -> a validated certification record."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{name}: not valid JSON: {exc}") from None
    return _record_of(name, raw)


def _check_network(name: str, caps: Iterable[Capability]) -> None:
    for cap in caps:
        for pattern in cap.network:
            check_pattern(pattern, f"{name}: capabilities.{cap.id}.network")


def parse_shared(data: bytes) -> dict[str, Capability]:

    try:
        raw = tomllib.loads(data.decode("utf-8")).get("capabilities", {})
        caps = {cid: Capability.model_validate({"id": cid, **body}) for cid, body in raw.items()}
        _check_network(SHARED, caps.values())
        return caps
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{SHARED}: not valid TOML: {exc}") from None
    except (ValidationError, TypeError) as exc:
        raise UsageError(validation_message(SHARED, exc)) from None


@cache
def shared_capabilities() -> dict[str, Capability]:
    return parse_shared(_read(SHARED))


def file_name(provider: str) -> str:
    return f"{provider}.toml"


def record_name(provider: str) -> str:
    return f"{provider}.certified.json"


def certification_record(provider: str) -> CertificationRecord:
    """The provider's certification record; none shipped means uncertified."""
    try:
        data = _read(record_name(provider))
    except UsageError:
        return CertificationRecord()
    return parse_record(record_name(provider), data)


@cache
def load(provider: str) -> Profile:
    profile = parse_profile(file_name(provider), _read(file_name(provider)), shared_capabilities(),
                            certification_record(provider))
    if profile.provider != provider:
        raise UsageError(f"{file_name(provider)}: provider: says {profile.provider!r}")
    return profile


def available() -> list[str]:
    names = [p.name for p in resources.files("tmuxjail.profile_data").iterdir()]
    return sorted(n[: -len(".toml")] for n in names if n.endswith(".toml") and n != SHARED)


def executables() -> list[tuple[str, str, list[str]]]:
    """(provider, display name, executable names) of every installed profile, read as plain TOML
    (the start menu and doctor: no validation needed to look names up on a PATH)."""
    out = []
    for p in available():
        try:
            raw = tomllib.loads(_read(file_name(p)).decode())
        except (UsageError, ValueError):
            continue
        names = raw.get("executables") or []
        out.append((p, str(raw.get("display_name", p)), [n for n in names if isinstance(n, str)]))
    return out


HASHES = "hashes.json"


def version_of(name: str, data: bytes) -> str:
    raw = tomllib.loads(data.decode("utf-8"))
    return str(raw.get("catalogue_version" if name == SHARED else "profile_version", ""))


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check(files: dict[str, bytes], recorded: dict[str, dict[str, Any]]) -> list[str]:
    """Pure: problems with the shipped profiles against the hash list kept in the repo. A file
    whose content changed while its version did not is the error this exists for."""
    problems = []
    for name, data in sorted(files.items()):
        rec = recorded.get(name)
        version = version_of(name, data)
        if rec is None:
            problems.append(f"{name}: not in {HASHES}; add it with: tmuxjail profiles check --update FILE")
        elif digest(data) != rec["sha256"] and version == rec["version"]:
            problems.append(f"{name}: content changed but its version ({version}) did not: bump it")
        elif digest(data) != rec["sha256"] or version != rec["version"]:
            problems.append(f"{name}: version {rec['version']} -> {version}: update {HASHES} (--update FILE)")
    for name in sorted(set(recorded) - set(files)):
        problems.append(f"{name}: listed in {HASHES} but not shipped")
    return problems


def shipped() -> dict[str, bytes]:
    return {f"{p}.toml": _read(f"{p}.toml") for p in available()} | {SHARED: _read(SHARED)}


def hash_list(files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    return {name: {"version": version_of(name, data), "sha256": digest(data)} for name, data in sorted(files.items())}


def recorded_hashes() -> dict[str, dict[str, Any]]:
    try:
        recorded: dict[str, dict[str, Any]] = json.loads(_read(HASHES))
    except UsageError:
        return {}
    return recorded
