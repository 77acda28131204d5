"""`tmuxjail doctor`: what this account and host are missing, and how to fix it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .. import config, doctor, hostos, paths, store
from ..context import Context
from ..errors import TmuxjailError
from ..registry import MODES
from ..render import Result
from ..request import StartRequest
from ..sessions.place import cwd
from ..sessions.start import dry_run
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
    results = doctor.checks(call.tmux, paths.get().store, dict(os.environ),
                            dry_runs=(lambda: seatbelt_dry_runs(call)) if hostos.darwin() else None)
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


# Whose dry run doctor checks on macOS: codex's, as the docs show it, else the shell's (always there).
DRY_RUN_PROVIDERS = ("codex", "shell")


def seatbelt_dry_runs(call: Call) -> list[tuple[str, str, dict[str, str]]]:
    """The Seatbelt profile and parameters `tmuxjail start PROVIDER --dry-run --backend seatbelt
    --mode MODE` builds here, for each mode the config allows; from this directory, else from HOME
    (a start refuses / as its workspace). An account with no store yet gets none: the dry runs
    use a scratch one."""
    if call.ctx.paths.store.exists():
        return _dry_runs(call.ctx)
    with tempfile.TemporaryDirectory(prefix="tmuxjail-doctor-") as scratch:
        ctx = _ScratchStore(call.ctx, store.Store(Path(scratch) / "store.db"))
        try:
            return _dry_runs(ctx)
        finally:
            ctx.store.close()


class _ScratchStore(Context):
    """The caller's context with a store of its own (doctor writes no state)."""

    def __init__(self, ctx: Context, scratch: store.Store) -> None:
        super().__init__(ctx.tmux, ctx.env, ctx.paths)
        self._store = scratch


def _dry_runs(ctx: Context) -> list[tuple[str, str, dict[str, str]]]:
    last = None
    allowed = config.load(ctx.paths.config_file).allowed_modes
    for provider in DRY_RUN_PROVIDERS:
        try:
            out = []
            for mode in (m for m in MODES if m in allowed):
                fields = {"mode": mode, "dry_run": True, "backend": "seatbelt", "non_interactive": True}
                try:
                    opts = StartRequest.build(cwd(ctx), provider, **fields)
                except TmuxjailError:
                    opts = StartRequest.build(str(ctx.paths.home), provider, **fields)
                got = dry_run(ctx, opts)
                out.append((f"{provider} {mode}", got["seatbelt_profile"], got["seatbelt_params"]))
            return out
        except TmuxjailError as exc:
            last = exc
    assert last is not None
    raise last
