"""Approvals: what a human approved, bound to exactly what runs. Pure matching and wording."""

from __future__ import annotations

from collections.abc import Iterable

from .net.policy import CREDENTIALS_ITEM, DOMAIN_ITEM, MCP_ITEM, is_domain_item

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Any

    from .model import Profile

    # An executable's identity and an approval record, as the store and the policy JSON hold them.
    Record = dict[str, Any]


def identity_key(identity: Record) -> Record:
    """What an approval pins of an executable: its path, sha256, version, and the hashes of
    whatever else decides what runs (a Node entry script's interpreter)."""
    return {"path": identity["path"], "sha256": identity["sha256"], "version": identity["version"],
            "extra": [list(x) for x in identity.get("extra", ())]}


def covers(approval: Record, provider: str, profile_hash: str, identity: Record, caps: Iterable[str]) -> bool:
    return (
        approval["provider"] == provider
        and approval["profile_hash"] == profile_hash
        and approval["executable"] == identity_key(identity)
        and set(caps) <= set(approval["capabilities"])
    )


def find(approvals: list[Record], provider: str, profile_hash: str, identity: Record,
         caps: Iterable[str]) -> Record | None:
    caps = tuple(caps)
    for a in reversed(approvals):  # newest first
        if covers(a, provider, profile_hash, identity, caps):
            return a
    return None


def missing(approvals: list[Record], profile: Profile, identity: Record, caps: Iterable[str]) -> list[str]:
    """Why no approval covers this run, in human words: one line per missing piece."""
    caps = tuple(caps)
    mine = [a for a in approvals if a["provider"] == profile.provider]
    if not mine:
        return [f"no approval for {profile.display_name}"]
    reasons = []
    same_profile = [a for a in mine if a["profile_hash"] == profile.hash]
    if not same_profile:
        reasons.append(f"the {profile.display_name} profile changed (now version {profile.profile_version}) since it was approved")
        same_profile = mine
    same_exe = [a for a in same_profile if a["executable"] == identity_key(identity)]
    if not same_exe:
        reasons.append(f"the executable changed since it was approved: {identity['path']} "
                       f"({identity['version']}, {identity['sha256'][:19]}…)")
        same_exe = same_profile
    best = max(same_exe, key=lambda a: len(set(caps) & set(a["capabilities"])))
    for cid in caps:
        if cid not in best["capabilities"]:
            reasons.append(f"capability not approved: {label(profile, cid)} ({cid})")
    return reasons


def label(profile: Profile, item: str) -> str:
    """A capability's label; an extra domain (verified mode) is an approval item of its own."""
    if is_domain_item(item):
        return f"Reach {item[len(DOMAIN_ITEM):]} through the proxy"
    if item == CREDENTIALS_ITEM:
        return f"Use the {profile.display_name} login kept by `tmuxjail login` (its credential files only)"
    if item.startswith(MCP_ITEM):
        name, _, digest = item[len(MCP_ITEM):].partition("@")
        return f"Use the MCP server {name} (its command {digest[:19]}…) through the session's broker"
    return profile.capabilities[item].label


def fix_command(provider: str, caps: Iterable[str], baseline: Iterable[str]) -> str:
    baseline = set(baseline)
    extra = [c for c in caps if c not in baseline]
    return " ".join(["tmuxjail approve", provider,
                     *(f"--allow-domain {c[len(DOMAIN_ITEM):]}" if is_domain_item(c)
                       else f"--mcp {c[len(MCP_ITEM):].partition('@')[0]}" if c.startswith(MCP_ITEM)
                       else "--credentials" if c == CREDENTIALS_ITEM
                       else f"--capability {c}" for c in extra)])


def describe(profile: Profile, identity: Record, caps: Iterable[str], details: bool) -> list[str]:
    """Exactly what an approval grants, in words first; --details adds paths, names and hosts."""
    lines = [f"{profile.display_name} (profile {profile.provider} v{profile.profile_version}, {profile.certification})"]
    for cid in caps:
        if is_domain_item(cid):
            lines.append(f"  - {label(profile, cid)}   [added domain]")
            continue
        if cid.startswith(MCP_ITEM) or cid == CREDENTIALS_ITEM:
            lines.append(f"  - {label(profile, cid)}   [{'MCP server' if cid != CREDENTIALS_ITEM else 'login'}]")
            continue
        cap = profile.capabilities[cid]
        lines.append(f"  - {cap.label}" + ("   [unverified]" if cap.unverified else ""))
        if details:
            for g in cap.paths:
                lines.append(f"      {g.access} {g.kind} {g.path}{' (if present)' if g.optional else ''}")
            if cap.env:
                lines.append("      env: " + " ".join(cap.env))
            if cap.network:
                lines.append("      network: " + " ".join(cap.network))
    lines.append(f"  executable: {identity['path']}")
    lines.append(f"    version {identity['version']}, {identity['sha256']}")
    for path, digest in identity.get("extra", ()):
        lines.append(f"    runs with {path} {digest}")
    return lines
