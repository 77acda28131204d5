"""What a certification run says: the text report and the change it suggests to the provider's
certification record (never applied here)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .. import profiles

if TYPE_CHECKING:
    from ..model import Profile


def suggest(profile: Profile, record: dict[str, Any]) -> list[str]:
    """The change to the provider's certification record a human may make (never applied here).
    The record lies outside the profile's hash: recording a version needs no re-approval."""
    ver = record.get("cli_version")
    fname = f"profiles/{profiles.record_name(profile.provider)}"
    if not ver:
        return []
    if not record["ok"]:
        failing = [m for m, r in record["modes"].items() if not r["ok"]]
        return [f"# {fname}: certification failed ({', '.join(failing) or record.get('error')}); keep",
                f'"certification": "{profile.certification if profile.certification != "certified" else "failing"}"']
    if record["standin"]:
        return [f"# {fname}: the stand-in of the documented contract passed; a stand-in run does not certify",
                f'# the real CLI: keep "certification": "documented-only" (currently "{profile.certification}")']
    versions = sorted(set(profile.certified_versions) | {ver})
    status = "certified"
    if status == profile.certification and ver in profile.certified_versions:
        return [f"# {fname}: already {status} on {ver}; no change"]
    return [f"# {fname} (outside the profile's hash: no version bump, no re-approval):",
            f'"certification": "{status}",',
            '"certified_versions": [' + ", ".join(json.dumps(v) for v in versions) + "]"]


def render(record: dict[str, Any]) -> str:
    lines = [f"certify {record['provider']} {record['cli_version']}"
             + (" (stand-in)" if record["standin"] else "") + f": {'PASS' if record['ok'] else 'FAIL'}"]
    if record.get("error"):
        lines.append(f"  error: {record['error']}")
    if record.get("executable"):
        lines.append(f"  executable: {record['executable']['path']} {record['executable']['sha256'][:23]}…")
    for mode, r in record["modes"].items():
        lines.append(f"  {mode}: {'pass' if r['ok'] else 'FAIL'}")
        for c in r["checks"]:
            obs = c["observed"]
            short = json.dumps(obs, sort_keys=True) if not isinstance(obs, str) else obs
            lines.append(f"    {'ok  ' if c['ok'] else 'FAIL'} {c['check']}" + ("" if c["ok"] else f": {short[:300]}"))
    rh = record["real_home"]
    lines.append(f"  real home {rh['path']}: {'unchanged' if rh['unchanged'] else 'CHANGED: ' + ', '.join(rh['changed'][:5])}"
                 f" ({rh['entries']} entries)")
    lines.append(f"  evidence: {record.get('evidence_file')}")
    if record.get("hint"):
        lines.append(f"  hint: {record['hint']}")
    if record["suggestion"]:
        lines.append("  suggested certification record (not applied):")
        lines += ["    " + s for s in record["suggestion"]]
    return "\n".join(lines)
