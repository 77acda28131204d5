"""`tmuxjail _pane --id ID --fp FP`: the process of a new pane in a jailed session (`shell`, and
the owned session's default-command behind tmux's new-window and split keys). Nothing secret in
its argv. It recomputes the policy, refuses on any change, writes a fresh one-shot spec, and
execs the same in-pane launcher as `start`, which execs bubblewrap, which execs the login shell.
It never runs anything unjailed: every path either execs the launcher or exits with one line."""

from __future__ import annotations

import os
import sys

from .. import jail, log, plan
from ..adapters import get as get_adapter
from ..context import Context
from ..errors import ResumeRefused, TmuxjailError
from ..identity import login_shell
from ..pane.command import launcher
from ..render import error, fail
from ..sessions.shell import live_row
from ..tmux import Tmux


def run_pane(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "--id" or argv[2] != "--fp":
        fail("usage: tmuxjail _pane --id SESSION_ID --fp FINGERPRINT")
        return 2
    sid, fp = argv[1], argv[3]
    tmux = Tmux()
    me = os.environ.get("TMUX_PANE", "")
    if me:  # a refusal stays on screen instead of closing the pane
        tmux.run("set-option", "-p", "-t", me, "remain-on-exit", "on", check=False)
    ctx = Context(tmux=tmux)
    log.setup(ctx.paths.log_file, False)
    try:
        row = live_row(ctx, sid)
        if row.id != sid or row.fingerprint != fp:
            raise ResumeRefused("this pane's fingerprint is not the session's (tampered); refusing",
                                data={"reasons": ["tampered"]})
        pol = plan.checked(ctx, row, "open a shell in it", "shell-refused")
        launch = jail.build(ctx, pol, [login_shell(), "-l"])
        spec = jail.stage(ctx, row.id, fp, pol, get_adapter(row.provider), launch, status_file=False)
        if me:
            args: list[str] = ["set-option", "-q", "-w", "-t", me, "allow-passthrough", "off"]
            for k, v in jail.options(row.id, pol, fp, row.start_request.worktree).items():
                args += [";", "set-option", "-p", "-t", me, k, v]
            tmux.run(*args, check=False)
        ctx.store.event("pane", row.id, fingerprint=fp, pane=me)
    except TmuxjailError as exc:
        return error(exc)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, launcher(sys.executable, fp, str(spec.path)))
    return 1  # not reached
