"""`tmuxjail profiles [list|show|check]`: the provider profiles, as people and as hashes."""

from __future__ import annotations

import json

from .. import profiles
from ..adapters import get as get_adapter
from ..errors import UsageError
from ..render import Result
from . import Call
from .table import JSON, Arg, declares


def _check(call: Call) -> Result:
    files = profiles.shipped()
    if call.args.update:
        with open(call.args.update, "w") as f:
            json.dump(profiles.hash_list(files), f, indent=2, sort_keys=True)
            f.write("\n")
        print(f"wrote {call.args.update}")
        return Result(None, None)
    problems = profiles.check(files, profiles.recorded_hashes())
    return Result({"ok": not problems, "problems": problems},
                  "\n".join(problems) if problems else f"ok: {len(files)} files match their versions",
                  code=1 if problems else 0)


def _show(call: Call) -> Result:
    a = call.args
    if not a.provider:
        raise UsageError("profiles show needs a PROVIDER")
    get_adapter(a.provider)
    p = profiles.load(a.provider)
    lines = [f"{p.display_name}  (profile {p.provider} v{p.profile_version}, {p.certification})"]
    for title, ids in (("always", p.baseline), ("optional", p.optional)):
        lines.append(f"{title}:")
        for cid in ids:
            cap = p.capabilities[cid]
            lines.append(f"  {cid:22} {cap.label}" + ("  [unverified]" if cap.unverified else ""))
            if a.details:
                for g in cap.paths:
                    lines.append(f"  {'':22}   {g.access} {g.kind} {g.path}{' (if present)' if g.optional else ''}")
                if cap.env:
                    lines.append(f"  {'':22}   env: {' '.join(cap.env)}")
                if cap.network:
                    lines.append(f"  {'':22}   network: {' '.join(cap.network)}")
    if a.details:
        lines.append(f"executables: {', '.join(p.executables)}; supported versions: {p.supported_versions or 'any'}")
        lines.append(f"certified on: {', '.join(p.certified_versions) or 'none yet'}; hash: {p.hash}")
    return Result(p.model_dump(mode="json"), "\n".join(lines))


@declares("tmuxjail profiles show codex --details",
          Arg("action", nargs="?", default="list", choices=("list", "show", "check")),
          Arg("provider", nargs="?", help="for show"),
          Arg("--details", action="store_true", help="show: add paths, env names, hosts, version range, certification"),
          Arg("--update", metavar="FILE", help="check: write the hash list to FILE (profiles/hashes.json in a checkout)"),
          JSON)
def run(call: Call) -> Result:
    if call.args.action == "check":
        return _check(call)
    if call.args.action == "show":
        return _show(call)
    data = [{"provider": p.provider, "profile_version": p.profile_version,
             "display_name": p.display_name, "certification": p.certification,
             "baseline": [p.capabilities[c].label for c in p.baseline]}
            for p in map(profiles.load, profiles.available())]
    return Result(data, "\n".join(f"{d['provider']:12} v{d['profile_version']}  {d['certification']:15} "
                                  f"{d['display_name']}" for d in data))
