"""The candidate profile: a TOML file in the same format as the shipped profiles, written under
tmuxjail's config directory (never a workspace), with evidence references. Writing one grants
nothing: only an approval bound to its hash (`tmuxjail approve PROVIDER --candidate ID`, on a
terminal) lets a verified run use it."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from .. import profiles
from ..errors import UsageError
from ..paths import ensure_private_dir
from .classify import Classification

ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,80}$")


def check_id(did: str) -> str:
    if not isinstance(did, str) or not ID_RE.match(did):
        raise UsageError(f"invalid discovery id {did!r}", hint="see: tmuxjail discover show --help")
    return did


def toml_str(s: str) -> str:
    """A TOML basic string: anything not printable ASCII is escaped."""
    out = []
    for ch in s:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0x20 <= ord(ch) < 0x7F:
            out.append(ch)
        elif ord(ch) > 0xFFFF:
            out.append(f"\\U{ord(ch):08X}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\\uFFFD")
        else:
            out.append(f"\\u{ord(ch):04X}")
    return '"' + "".join(out) + '"'


def _list(items) -> str:
    return "[" + ", ".join(toml_str(i) for i in items) + "]"


def _cap_table(cid: str, cap) -> list[str]:
    lines = [f"[capabilities.{toml_str(cid)}]", f"label = {toml_str(cap.label)}"]
    if cap.description:
        lines.append(f"description = {toml_str(cap.description)}")
    if cap.paths:
        grants = ", ".join(
            f"{{ path = {toml_str(g.path)}, kind = {toml_str(g.kind)}, access = {toml_str(g.access)}, "
            f"optional = {'true' if g.optional else 'false'} }}" for g in cap.paths)
        lines.append(f"paths = [{grants}]")
    if cap.env:
        lines.append(f"env = {_list(cap.env)}")
    if cap.network:
        lines.append(f"network = {_list(cap.network)}")
    if cap.unverified:
        lines.append("unverified = true")
    return lines


def _refs(uses) -> str:
    lines = sorted({n for u in uses for n in u.lines})[:8]
    return "trace lines " + ", ".join(map(str, lines)) if lines else "no trace line"


def render(did: str, shipped, catalogue: dict, cls: Classification, evidence_ref: str) -> str:
    caps = cls.capabilities
    own = [c for c in caps if c not in catalogue]
    optional = [c for c in shipped.optional if c not in caps]
    evidence = [f"discovery {did}: {evidence_ref}"]
    evidence += [f"overlay {cid}: " + "; ".join(f"{'/'.join(u.kinds or sorted(u.tried))} {u.path}" for u in uses[:4])
                 + f" ({_refs(uses)})" for cid, uses in cls.overlay.items()]
    evidence += [f"dropped from the shipped baseline (never touched): {c}" for c in cls.dropped]
    evidence += [f"raw, not granted: {'/'.join(u.kinds or sorted(u.tried))} {u.path} ({_refs([u])})"
                 for u in cls.raw[:50]]
    evidence += [f"tmuxjail's own files, never granted: {u.path} ({_refs([u])})" for u in cls.never[:20]]
    lines = [
        f"# Candidate profile from discovery {did}. NOT APPROVED: it has no effect until",
        f"#   tmuxjail approve {shipped.provider} --candidate {did}",
        "# shows a human what it grants and the human confirms on a terminal.",
        f"provider = {toml_str(shipped.provider)}",
        f"profile_version = {toml_str(shipped.profile_version + '+' + did)}",
        f"display_name = {toml_str(shipped.display_name)}",
        f"executables = {_list(shipped.executables)}",
    ]
    if shipped.supported_versions:
        lines.append(f"supported_versions = {toml_str(shipped.supported_versions)}")
    lines += [
        'certification = "uncertified"',
        "evidence = [\n" + "".join(f"  {toml_str(e)},\n" for e in evidence) + "]",
        f"baseline = {_list(caps)}",
        f"optional = {_list(optional)}",
        "",
    ]
    for cid in [*own, *(c for c in optional if c not in catalogue)]:
        lines += [*_cap_table(cid, shipped.capabilities[cid]), ""]
    return "\n".join(lines)


def directory(config_dir: Path) -> Path:
    return config_dir / "candidates"


def write(config_dir: Path, did: str, text: str) -> Path:

    d = ensure_private_dir(directory(config_dir))
    path = d / f"{check_id(did)}.toml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def read(config_dir: Path, did: str) -> bytes:
    path = directory(config_dir) / f"{check_id(did)}.toml"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        raise UsageError(f"no candidate {did}", hint="see: tmuxjail discover show ID") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise UsageError(f"candidate {did} is not a regular file of yours; refusing it")
        return f.read(1 << 20)


def load(config_dir: Path, provider: str, did: str):
    """The candidate as a Profile, validated exactly like a shipped one (its hash covers the
    catalogue too)."""

    data = read(config_dir, did)
    p = profiles.parse_profile(f"candidate {did}", data, profiles.shared_capabilities(), inline_record=True)
    if p.provider != provider:
        raise UsageError(f"candidate {did} is for {p.provider}, not {provider}")
    return p


def diff(shipped, cand) -> dict[str, list[str]]:
    return {"widens": [c for c in cand.baseline if c not in shipped.baseline],
            "narrows": [c for c in shipped.baseline if c not in cand.baseline],
            "same": [c for c in cand.baseline if c in shipped.baseline]}


RED, RESET = "\033[1;31m", "\033[0m"


def describe(shipped, cand, details: bool, color: bool) -> list[str]:
    """The diff in human words; --details adds paths, env names and hosts."""
    d = diff(shipped, cand)

    def cap_lines(cid: str, mark: str) -> list[str]:
        cap = cand.capabilities.get(cid) or shipped.capabilities[cid]
        out = [f"  {mark} {cap.label}  ({cid})"]
        if details:
            out += [f"      {g.access} {g.kind} {g.path}{' (if present)' if g.optional else ''}" for g in cap.paths]
            if cap.env:
                out.append("      env: " + " ".join(cap.env))
            if cap.network:
                out.append("      network: " + " ".join(cap.network))
        return out

    lines = [f"Candidate {cand.profile_version} for {shipped.display_name}, against the shipped profile "
             f"v{shipped.profile_version}:"]
    if d["widens"]:
        head = "WIDENS the shipped baseline: every verified run with this profile would also get:"
        lines.append(f"{RED}{head}{RESET}" if color else head)
        for c in d["widens"]:
            lines += [f"{RED}{x}{RESET}" if color else x for x in cap_lines(c, "+")]
    if d["narrows"]:
        lines.append("Narrower than the shipped baseline (this run never used):")
        for c in d["narrows"]:
            lines += cap_lines(c, "-")
    if d["same"]:
        lines.append("Same as the shipped baseline:")
        for c in d["same"]:
            lines += cap_lines(c, "=")
    raw = [e for e in cand.evidence if e.startswith("raw, not granted: ")]
    if raw:
        lines.append(f"Seen but not granted ({len(raw)} path(s) no capability covers; review them by hand):")
        lines += [f"  ? {e[len('raw, not granted: '):]}" for e in (raw if details else raw[:5])]
        if not details and len(raw) > 5:
            lines.append("  … (--details lists them all)")
    lines.append(f"Evidence: {cand.evidence[0] if cand.evidence else 'none'}")
    return lines


def as_json(shipped, cand) -> dict:
    return {"profile_version": cand.profile_version, "profile_hash": cand.hash, **diff(shipped, cand),
            "evidence": list(cand.evidence)}


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
