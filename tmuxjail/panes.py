"""Panes beyond a session's first one.

- Where a new jail goes: `start --here` (a new window in the current session) and
  `start --split h|v` (a split of the current pane). Such a jail lives in someone else's session,
  so its @tmuxjail_* options are set on its pane only.
- Shells inside an existing jail: `tmuxjail shell NAME`, and the session `default-command` that
  makes tmux's own new-window and split keys open inside the same jail. Both run the hidden
  subcommand `_pane --id ID --fp FP` (nothing secret: an id and a fingerprint), which recomputes
  the policy, refuses on any change, writes a fresh one-shot spec, and execs the same in-pane
  launcher as `start`, which execs bubblewrap, which execs the user's login shell.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections import namedtuple
from pathlib import Path

from .errors import ResumeRefused, TmuxjailError, UsageError

LAUNCH_MARK = "tmuxjail.launch"
PANE_MARK = " _pane "
READY_TIMEOUT = 10.0

Placement = namedtuple("Placement", "kind split target session")


# -- recognising our panes (pure, cheap: `list` runs this for every pane) ----------------------

def placement(row) -> str:
    """"session" when tmuxjail created (and owns) the tmux session, else "window" or "split"."""
    try:
        return json.loads(row.request).get("placement", "session")
    except (TypeError, ValueError):
        return "session"


def kind(start_command: str, fp: str | None) -> str | None:
    """"agent" for the launcher of this fingerprint, "shell" for a `_pane` of it, else None.
    The fingerprint must be in the pane's own start command: options can be set by anyone who
    reaches the tmux server, and are lost on a restart; the start command is what tmux ran."""
    if not fp or f"--fp {fp}" not in start_command:
        return None
    if LAUNCH_MARK in start_command:
        return "agent"
    if PANE_MARK in start_command:
        return "shell"
    return None


def pane_argv(sid: str, fp: str) -> list[str]:
    # -E -P: no PYTHON* variables, and (unlike plain -m) not the pane's cwd, which is the
    # workspace, on sys.path: a `tmuxjail/` directory planted there is never imported. Not -I,
    # which would also drop the user site that `pip install --user` puts tmuxjail in.
    return [sys.executable, "-E", "-P", "-m", "tmuxjail", "_pane", "--id", sid, "--fp", fp]


def default_command(sid: str, fp: str) -> str:
    """The owned session's default-command: tmux runs it with `default-shell -c`."""
    return "exec " + shlex.join(pane_argv(sid, fp))


def session_options(sid: str, fp: str) -> dict[str, str]:
    return {"default-command": default_command(sid, fp)}


# -- start --here / --split ------------------------------------------------------------------

def here(tmux, env: dict, how: str, split: str | None = None) -> Placement:
    pane = env.get("TMUX_PANE", "")
    if not tmux.inside or not pane:
        raise UsageError(f"--{'here' if how == 'window' else 'split'} works only inside tmux",
                         hint="run it from a tmux pane, or leave it out to start a new session")
    if tmux.inside.split(",")[0] != tmux.socket:
        raise UsageError("--here/--split need the tmux server you are in; drop -L/-S")
    session = tmux.pane_option(pane, "session_name")
    if not session:
        raise UsageError(f"tmux pane {pane} is gone")
    # new-window takes a window; split-window the pane itself.
    target = tmux.pane_option(pane, "window_id") if how == "window" else pane
    return Placement(how, split or "v", target, session)


def open_here(tmux, place: Placement, argv: list[str], cwd: str, options: dict, detach: bool) -> str:
    return tmux.new_pane(place.kind, place.target, argv, cwd, options, detach=detach, split=place.split)


def kill(tmux, row) -> None:
    """Stop a jail that lives in someone else's session: its own panes only."""
    for p in tmux.panes():
        if p.tmuxjail_id == row.id and kind(p.start_command, row.fingerprint):
            tmux.run("kill-pane", "-t", p.pane_id, check=False)


# -- shells inside a jail --------------------------------------------------------------------

def _live_row(ctx, name: str):
    row = ctx.store.find(name)
    if row is None or row.status == "stopped":
        raise UsageError(f"no live session named {name!r}", hint="see: tmuxjail list")
    if not row.fingerprint or not row.policy:
        raise ResumeRefused(f"{row.name} has no recorded fingerprint; refusing to open a shell in it",
                            data={"name": row.name, "reasons": ["tampered"]})
    return row


def _checked_policy(ctx, row) -> dict:
    """Today's policy, only if it is still exactly the recorded one."""
    from . import sessions

    fp, pol, reasons = sessions.recompute(ctx, row)
    if fp != row.fingerprint:
        reasons = reasons or ["tampered"]
        ctx.store.event("shell-refused", row.id, reasons=reasons)
        raise ResumeRefused(
            f"{row.name}: the policy changed since the session started ({', '.join(reasons)}); "
            "refusing to open a shell in it",
            hint=f"inspect with `tmuxjail show {row.name}`", data={"name": row.name, "reasons": reasons})
    if pol.get("mode") == "verified" and hasattr(sessions, "_still_approved"):
        sessions._still_approved(ctx, row, pol)
    return pol


def shell(ctx, name: str, detach: bool = False) -> dict:
    from . import sessions

    row = _live_row(ctx, name)
    ctx = sessions.where_it_runs(ctx, row, "shell")  # its own server, whatever -L/-S/TMUX say
    if not ctx.tmux.has_session(row.tmux_session):
        raise UsageError(f"{row.name} is not running", hint=f"resume it first: tmuxjail resume {row.name}")
    _checked_policy(ctx, row)  # refuse here, with an exit code, rather than in a dead pane
    cwd = json.loads(row.request)["workspaces"][0]
    pane = ctx.tmux.new_pane("window", f"={row.tmux_session}:", pane_argv(row.id, row.fingerprint), cwd,
                             {}, detach=True)
    failure = wait_jailed(ctx.tmux, pane, row.policy_data.get("backend") == "none")
    if failure:
        raise TmuxjailError(f"the shell did not start: {failure}", hint="the dead pane keeps the message")
    if not detach:
        ctx.tmux.run("select-window", "-t", pane, check=False)
    ctx.store.event("shell", row.id, fingerprint=row.fingerprint, pane=pane)
    out = sessions.describe(ctx, row)
    out.update(shell_pane=pane, attach=None if detach else ctx.tmux.attach_argv(row.tmux_session))
    return out


def wait_jailed(tmux, pane: str, unguarded: bool) -> str | None:
    """None once the pane's own process is bubblewrap with the shell running under it."""
    from .host import jail_exec_started

    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        info = tmux.pane_option(pane, "pane_dead") + " " + tmux.pane_option(pane, "pane_pid")
        dead, _, pid = info.partition(" ")
        if dead == "1" or not pid:
            lines = [ln for ln in tmux.capture(pane).splitlines() if ln.strip()]
            return next((ln for ln in reversed(lines) if "tmuxjail:" in ln or "bwrap" in ln),
                        lines[-1] if lines else "the pane exited at once")
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            comm = ""
        if comm == "bwrap" and jail_exec_started(int(pid)):
            return None
        if unguarded and comm and comm not in ("python", "python3") and not comm.startswith("python3."):
            return None
        time.sleep(0.03)
    return f"the sandbox did not come up within {READY_TIMEOUT:.0f}s"


def run_pane(argv: list[str]) -> int:
    """`tmuxjail _pane --id ID --fp FP`: the process of a new pane in a jailed session. It never
    runs anything unjailed: every path either execs the launcher or exits with one line."""
    if len(argv) != 4 or argv[0] != "--id" or argv[2] != "--fp":
        print("tmuxjail: usage: tmuxjail _pane --id SESSION_ID --fp FINGERPRINT", file=sys.stderr)
        return 2
    sid, fp = argv[1], argv[3]
    from . import log, sessions
    from .tmux import Tmux

    tmux = Tmux()
    me = os.environ.get("TMUX_PANE", "")
    if me:  # a refusal stays on screen instead of closing the pane
        tmux.run("set-option", "-p", "-t", me, "remain-on-exit", "on", check=False)
    ctx = sessions.Context(tmux=tmux)
    log.setup(ctx.paths.log_file, False)
    try:
        row = _live_row(ctx, sid)
        if row.id != sid or row.fingerprint != fp:
            raise ResumeRefused("this pane's fingerprint is not the session's (tampered); refusing",
                                data={"reasons": ["tampered"]})
        pol = _checked_policy(ctx, row)
        from .adapters import get as get_adapter
        from .identity import login_shell
        from .sandbox import bwrap

        unguarded = pol["backend"] == "none"
        layout = sessions._host_layout(ctx, unguarded)
        sandbox_argv = sessions._sandbox_argv(ctx, pol, bwrap.find(), [login_shell(), "-l"], unguarded, layout)
        sessions._prepare_dirs(ctx, pol, get_adapter(row.provider))
        spec, _status = sessions._write_spec(ctx, row.id, fp, pol, sandbox_argv, unguarded, layout)
        _no_status_file(spec)
        if me:
            opts = sessions._options(row.id, pol, fp)
            args: list[str] = ["set-option", "-q", "-w", "-t", me, "allow-passthrough", "off"]
            for k, v in opts.items():
                args += [";", "set-option", "-p", "-t", me, k, v]
            tmux.run(*args, check=False)
        ctx.store.event("pane", row.id, fingerprint=fp, pane=me)
    except TmuxjailError as exc:
        print(f"tmuxjail: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  {exc.hint}", file=sys.stderr)
        return exc.code
    from .launch import pane_command

    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, pane_command(sys.executable, fp, str(spec)))
    return 1  # not reached


def _no_status_file(spec) -> None:
    """Nobody waits on the sandbox status of an extra pane: send it to /dev/null rather than
    leave a file per pane in the spool."""
    with open(spec) as f:
        body = json.load(f)
    body["status_file"] = os.devnull
    tmp = f"{spec}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(body, f)
    os.replace(tmp, spec)
