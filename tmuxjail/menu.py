"""`tmuxjail menu ACTION`: the tmux side of the key table in tmux.conf.example.

Each binding runs `tmuxjail menu ACTION -c CLIENT -t PANE` through `run-shell -b`, and this module
builds the tmux command (a display-menu, a popup, a confirm prompt) from what is installed and
allowed, and runs it on that server for that client. `--print` prints the command instead.

  start   display-menu of provider x allowed mode (installed profiles, operator config)
  resume  display-menu of the jailed sessions of this server
  list    popup with `tmuxjail list --check`
  shell   a login shell in a new window, inside the jail of pane PANE
  policy  popup with `tmuxjail show` of the jail of pane PANE, in a pager
  stop    confirm, then `tmuxjail stop` the jail of pane PANE

A refusal (a resume, a stop, a start from a menu item) is shown to the client as a menu of
greyed lines, the reason and then the fix (`refusal`), never as tmux's quoted command line.

No string from a pane, a window, a session or a jail ever reaches a tmux command: tmux expands
`#(...)` and `#{...}` in a menu item's command when it builds the menu and again when run-shell
runs it, so a directory named `#(...)` would run in the tmux server, outside every jail. Menu
items and prompts carry ids only (a pane id, a client name, a session id from the store, a
provider and a mode from fixed lists), each checked against a strict pattern (`word`), and the
hidden action `_start` reads the pane's directory itself when the item runs and passes it on as
an argv element, never inside a tmux command string.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys

from . import log
from .errors import TmuxjailError, UsageError
from .pane import command as pane_command
from .registry import MODES, PROVIDERS, Mode
from .render import Result, error_text
from .status import rows

ACTIONS = ("start", "resume", "list", "shell", "policy", "stop")
KEYS = "123456789abcdefghijklmnopqrstuvwxyz"
PANE_RE = re.compile(r"^%[0-9]{1,9}$")
CLIENT_RE = re.compile(r"^[A-Za-z0-9/_.+-]{1,200}$")  # a tty path, or client-PID
# What may appear in a tmux command string tmuxjail builds: no `#` (formats), `$`, `~`, quotes,
# backslashes, `;` or `{}` (tmux's parser), no control characters.
SAFE_RE = re.compile(r"^[A-Za-z0-9/_.,+=:@% -]*$")


def word(s: str, what: str = "value") -> str:
    """s, if it may go into a tmux command string as is; else refuse (nothing is escaped)."""
    if not SAFE_RE.match(s):
        raise TmuxjailError(f"refusing to put this {what} into a tmux command: {_printable(s)}",
                            hint="tmux would expand it; install tmuxjail under a plain path")
    return s


def _printable(s: str) -> str:
    return "".join(c if SAFE_RE.match(c) else "?" for c in s)[:120]


def label(s: str) -> str:
    """Text for a menu label or prompt, which tmux expands as a format: no `#`, no control
    characters."""
    return "".join("?" if c == "#" or not c.isprintable() else c for c in s)[:120]


def check_ids(client: str | None, pane: str | None) -> None:
    if client is not None and not CLIENT_RE.match(client):
        raise UsageError(f"invalid tmux client name {_printable(client)!r}")
    if pane is not None and not PANE_RE.match(pane):
        raise UsageError(f"invalid tmux pane id {_printable(pane)!r}", hint="a pane id looks like %3")


def self_argv(tmux) -> list[str]:
    """How tmux runs tmuxjail again: this interpreter, with no PYTHON* variables and the cwd not on
    sys.path (-E -P; not -I, which drops the user site of `pip install --user`), at this server."""
    return [*pane_command.tmuxjail(sys.executable), "-S", tmux.socket]


def _command(tmux, *args: str) -> str:
    """A shell command line of tmuxjail, from safe words only."""
    return shlex.join([word(a, "argument") for a in [*self_argv(tmux), *args]])


def _run_shell(tmux, *args: str) -> str:
    return f'run-shell -b "{_command(tmux, *args)}"'


OFF_PATH = "not on the tmux server's PATH"


def providers() -> list[tuple[str, str, bool]]:
    """(provider, display name, on this process's PATH?): run from a key, that is the tmux
    server's PATH, which may lack a CLI the user's shell finds (28.6)."""
    from .profiles import executables  # seam: the start menu only

    path_env = os.environ.get("PATH", os.defpath)
    return [(p, display, p == "shell" or any(shutil.which(n, path=path_env) for n in names))
            for p, display, names in executables()]


def allowed_modes(ctx) -> tuple[tuple[str, ...], str]:
    from . import config  # seam: the start menu only

    cfg = config.load(ctx.paths.config_file)
    return cfg.allowed_modes, cfg.default_mode


def _ids(client: str | None, pane: str | None) -> list[str]:
    return [*(["-t", pane] if pane else []), *(["-c", client] if client else [])]


def start_menu(ctx, client: str | None, pane: str | None) -> list[str]:
    tmux = ctx.tmux
    modes, default = allowed_modes(ctx)
    where = "the current pane's directory" if pane else "the current directory"
    args = ["display-menu", *(["-c", client] if client else []), *(["-t", pane] if pane else []),
            "-T", f"tmuxjail: start in {where}", "-x", "C", "-y", "C",
            "--"]  # the items follow: a greyed `-claude-code ...` is not tmux's -c option
    keys = iter(KEYS)
    missing = False
    for provider, _display, installed in providers():
        for mode in modes:
            text = label(f"{provider:<12} {mode}{' (default)' if mode == default else ''}")
            if not installed:  # a leading `-` greys the item out (after `--`, see below)
                args += [f"-{text}   {OFF_PATH}", "", ""]
                missing = True
                continue
            args += [text, next(keys, ""), _run_shell(tmux, "menu", "_start", provider, mode, *_ids(client, pane))]
        strict = next((m for m in modes if Mode(m).strict), None)
        if installed and strict:  # docs/worktrees.md: a checkout and branch of its own, in the repository here
            args += [label(f"{provider:<12} {strict}, new git worktree"), next(keys, ""),
                     _run_shell(tmux, "menu", "_start", provider, strict, "worktree", *_ids(client, pane))]
        args.append("")  # a separator line between providers (one empty argument)
    while args and args[-1] == "":
        args.pop()
    if missing:
        args += ["", "-fix: put its directory on the server's PATH (`tmuxjail doctor` says how)", "", ""]
    return args


def resume_menu(ctx, client: str | None, pane: str | None) -> list[str]:
    tmux = ctx.tmux
    args = ["display-menu", *(["-c", client] if client else []), *(["-t", pane] if pane else []),
            "-T", "tmuxjail: resume", "-x", "C", "-y", "C", "--"]
    keys = iter(KEYS)
    found = False
    for d in rows(ctx, activity=False, server=ctx.tmux.socket):
        if d["kind"] != "agent" or d["status"] not in ("running", "exited", "killed", "gone"):
            continue
        found = True
        text = label(f"{d['name']:<24} {d['provider']}/{d['mode']}  {d['status']}")
        args += [text, next(keys, ""), _run_shell(tmux, "menu", "_resume", d["id"], *_ids(client, pane))]
    if not found:
        args += ["-no jailed session on this server", "", ""]
    args += ["", label(f"-server: {tmux.socket}"), "", ""]  # which server's sessions these are
    return args


def refusal(client: str | None, message: str, hint: str | None) -> list[str]:
    """A display-menu of greyed lines: what was refused and why, then the fix. (display-message
    shows one line, cut to the terminal's width; a menu stays until Esc.)"""
    import textwrap

    lines = textwrap.wrap(message, 72) or [""]
    if hint:
        lines += ["", *textwrap.wrap("fix: " + hint, 72, subsequent_indent="     ")]
    args = ["display-menu", *(["-c", client] if client else []), "-T", "tmuxjail: refused (Esc closes)",
            "-x", "C", "-y", "C", "--"]
    for line in lines:
        args += [f"-{label(line)}", "", ""] if line else [""]
    return args


def resume_here(ctx, client: str | None, rest: list[str]) -> None:
    """`menu _resume ID -c CLIENT`: what a resume-menu item runs."""
    from .sessions.resume import resume  # seam: resuming loads the policy code

    if len(rest) != 1 or not pane_command.is_session_id(rest[0]):
        raise UsageError("usage: tmuxjail menu _resume ID [-c CLIENT]")
    log.setup(ctx.paths.log_file, False)
    result = resume(ctx, rest[0], detach=True)
    if client:
        ctx.tmux.switch_client(client, result.get("tmux_pane") or f"={result['tmux_session']}")


def stop_here(ctx, rest: list[str]) -> None:
    """`menu _stop ID -c CLIENT`: what the stop prompt runs."""
    from .sessions.stop import stop

    if len(rest) != 1 or not pane_command.is_session_id(rest[0]):
        raise UsageError("usage: tmuxjail menu _stop ID [-c CLIENT]")
    log.setup(ctx.paths.log_file, False)
    stop(ctx, rest[0])


def _jail_of(ctx, pane: str | None):
    """The store's row of the jail pane PANE runs in. The pane's @tmuxjail_id is only a key: what
    goes on is the id the store holds."""
    if not pane:
        raise UsageError("this action needs -t PANE")
    sid = ctx.tmux.pane_option(pane, "@tmuxjail_id")
    row = ctx.readonly_store().find(sid) if sid else None
    if row is None or row.id != sid or row.status == "stopped":
        raise UsageError(f"pane {pane} is not in a jail")
    return row


def pane_directory(tmux, pane: str) -> str:
    """The directory of PANE as tmux sees it, read here when the item runs (never before)."""
    proc = tmux.run("display-message", "-p", "-t", pane, "#{pane_current_path}", check=False)
    path = proc.stdout.removesuffix("\n")
    if proc.returncode != 0 or not os.path.isabs(path) or not os.path.isdir(path):
        raise UsageError(f"cannot read the directory of pane {pane}",
                         hint="start from a shell: tmuxjail start PROVIDER --workspace DIR")
    return path


def _start_directory(ctx, pane: str) -> str:
    """Where a start-menu item starts. In a jail's pane the path tmux reports is the jail's own
    view (its private home at your $HOME path, a directory it made): never a host path to hand to
    a new jail. There the new jail starts in that jail's recorded workspace instead."""
    if ctx.tmux.pane_option(pane, "@tmuxjail_id"):
        row = _jail_of(ctx, pane)
        return row.start_request.workspaces[0]
    return pane_directory(ctx.tmux, pane)


def start_here(ctx, client: str | None, pane: str | None, rest: list[str]) -> None:
    """`menu _start PROVIDER MODE -t PANE -c CLIENT`: what a start-menu item runs."""
    from .request import StartRequest
    from .sessions.start import start  # seam: starting loads the policy code

    if len(rest) not in (2, 3) or rest[0] not in PROVIDERS or rest[1] not in MODES or not pane \
            or rest[2:] not in ([], ["worktree"]):
        raise UsageError("usage: tmuxjail menu _start PROVIDER MODE [worktree] -t PANE [-c CLIENT]")
    log.setup(ctx.paths.log_file, False)
    cwd = _start_directory(ctx, pane)
    made = None
    if rest[2:]:
        from . import worktree  # seam: the worktree item only

        made = worktree.for_start(ctx.paths, cwd, rest[0], None, None, rest[1])
        cwd = made["path"]
        with worktree.discarded_on_failure(made):
            result = start(ctx, StartRequest.build(cwd, rest[0], mode=rest[1], workspaces=(cwd,),
                                                   non_interactive=True, detach=True, worktree=made))
    else:
        result = start(ctx, StartRequest.build(cwd, rest[0], mode=rest[1], workspaces=(cwd,),
                                               non_interactive=True, detach=True))
    if client:
        ctx.tmux.switch_client(client, result.get("tmux_pane") or f"={result['tmux_session']}")


def build(ctx, action: str, client: str | None, pane: str | None) -> list[str] | None:
    """The tmux command (argv after `tmux -S socket`) for an action, or None when the action is
    done here (shell)."""
    tmux = ctx.tmux
    if action == "start":
        return start_menu(ctx, client, pane)
    if action == "resume":
        return resume_menu(ctx, client, pane)
    if action == "list":
        return ["display-popup", *(["-c", client] if client else []), "-w", "90%", "-h", "60%",
                "-T", " tmuxjail list (Esc closes) ", _command(tmux, "list", "--check", "--color", "always")]
    if action == "policy":
        row = _jail_of(ctx, pane)
        # -E: the popup closes with the pager. `-+F`: a short policy still waits for `q`.
        pager = "less -R -+F -+X" if shutil.which("less") else "more"
        return ["display-popup", *(["-c", client] if client else []), "-E", "-w", "90%", "-h", "80%",
                "-T", " tmuxjail policy (q closes) ", f"{_command(tmux, 'show', row.id)} | {pager}"]
    if action == "stop":
        row = _jail_of(ctx, pane)
        return ["confirm-before", *(["-t", client] if client else []),
                "-p", label(f"stop jail {row.name} (kills its panes)? (y/n)"),
                _run_shell(tmux, "menu", "_stop", row.id, *_ids(client, None))]
    if action == "shell":
        return None
    raise UsageError(f"unknown menu action {action!r}", hint="one of: " + ", ".join(ACTIONS))


def run(ctx, action: str, client: str | None, pane: str | None, print_only: bool,
        rest: list[str] | None = None) -> Result:
    """What the action did, for the renderer: with --print, the command (words for --json, a
    shell line otherwise); nothing else is printed (tmux would show it in view mode)."""
    try:
        check_ids(client, pane)
        if action == "_start":
            start_here(ctx, client, pane, rest or [])
            return Result(None)
        if action == "_resume":
            resume_here(ctx, client, rest or [])
            return Result(None)
        if action == "_stop":
            stop_here(ctx, rest or [])
            return Result(None)
        if rest:
            raise UsageError(f"unexpected arguments: {' '.join(rest)}")
        argv = build(ctx, action, client, pane)
        if argv is None:  # shell
            from .sessions.shell import shell  # seam: the policy code, as `tmuxjail shell`

            row = _jail_of(ctx, pane)
            if print_only:
                return _printed([*self_argv(ctx.tmux), "shell", row.id])
            out = shell(ctx, row.id, detach=True)
            ctx.tmux.switch_client(client, out["shell_pane"])
            return Result(None)
        if print_only:
            return _printed(["tmux", "-S", ctx.tmux.socket, *argv])
        if argv[0] == "display-popup":
            # A popup blocks its tmux client until it closes: leave it to tmux.
            ctx.tmux.run_detached(*argv)
            return Result(None)
        ctx.tmux.run(*argv)
        return Result(None)
    except TmuxjailError as exc:
        if print_only or not (ctx.tmux.inside or client):
            raise
        shown = ctx.tmux.run(*refusal(client if client and CLIENT_RE.match(client) else None,
                                      exc.message, exc.hint), check=False)
        if shown.returncode != 0:  # no client to show a menu on: one line, as tmux can
            # display-message expands its text once: `#` doubled, and no control characters.
            msg = "".join(c if c.isprintable() else "?" for c in error_text(exc.message, exc.hint)).replace("#", "##")
            ctx.tmux.run("display-message", msg.replace("\n", " "), check=False)
        return Result(None)  # reported: a non-zero status would also put the pane in view mode


def _printed(argv: list[str]) -> Result:
    return Result({"command": argv}, shlex.join(argv))
