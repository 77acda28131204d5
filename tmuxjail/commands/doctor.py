"""`tmuxjail doctor`: what this account and host are missing, and how to fix it."""

from __future__ import annotations

import os

from .. import doctor, paths, store
from ..render import Result
from . import Call
from .table import JSON, Arg, declares


@declares("tmuxjail doctor",
          Arg("--move-store-aside", action="store_true",
              help="rename a damaged store to store.db.broken-TIME (kept) and copy what still reads into a new one"),
          JSON)
def run(call: Call) -> Result:
    if call.args.move_store_aside:
        moved = store.move_aside(paths.get().store)
        return Result(moved, f"moved the store to {moved['moved_to']}; kept in the new one: "
                      + ", ".join(f"{n} {t}" for t, n in sorted(moved["kept"].items())))
    results = doctor.checks(call.tmux, paths.get().store, dict(os.environ))
    failed = [c for c in results if c["required"] and not c["ok"]]
    lines = []
    for c in results:
        mark = "ok  " if c["ok"] else ("FAIL" if c["required"] else "warn")
        lines.append(f"{mark}  {c['check']}: {c['detail']}")
        if c.get("breaks"):
            lines.append(f"      breaks: {c['breaks']}")
        if c["fix"]:
            lines.append(f"      fix: {c['fix']}")
    return Result({"ok": not failed, "checks": results}, "\n".join(lines), code=1 if failed else 0)
