"""`tmuxjail menu ACTION`: the tmux side of the key table in tmux.conf.example.

Each binding runs `tmuxjail menu ACTION -c CLIENT -t PANE` through `run-shell -b`, and this module
builds the tmux command (a display-menu, a popup, a confirm prompt) from what is installed and
allowed, and runs it on that server for that client. Quoting is done here, once, in Python, not
in the tmux config. `--print` prints the command instead of running it.

  start   display-menu of provider x allowed mode (installed profiles, operator config)
  resume  display-menu of the jailed sessions of this server
  list    popup with `tmuxjail list --check`
  shell   a login shell in a new window, inside the jail of pane PANE
  policy  popup with `tmuxjail show` of the jail of pane PANE
  stop    confirm, then `tmuxjail stop` the jail of pane PANE
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib

from .errors import TmuxjailError, UsageError

ACTIONS = ("start", "resume", "list", "shell", "policy", "stop")
KEYS = "123456789abcdefghijklmnopqrstuvwxyz"


def tmux_quote(s: str) -> str:
    """A double-quoted word for tmux's command parser, with `#` doubled for format expansion."""
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("#", "##")
    return f'"{s}"'


def self_argv(tmux) -> list[str]:
    """How tmux runs tmuxjail again: this interpreter, with no PYTHON* variables and the cwd not on
    sys.path (-E -P; not -I, which drops the user site of `pip install --user`), at this server."""
    return [sys.executable, "-E", "-P", "-m", "tmuxjail", "-S", tmux.socket]


def _run_shell(tmux, *args: str) -> str:
    return "run-shell -b " + tmux_quote(shlex.join([*self_argv(tmux), *args]))


def providers() -> list[tuple[str, str, bool]]:
    """(provider, display name, installed?) from the installed profiles, without pydantic."""
    from importlib import resources

    from .profiles import available, file_name

    out = []
    path_env = os.environ.get("PATH", os.defpath)
    for p in available():
        try:
            raw = tomllib.loads(resources.files("tmuxjail.profile_data").joinpath(file_name(p)).read_text())
        except (OSError, ValueError):
            continue
        names = raw.get("executables", []) or []
        ok = p == "shell" or any(shutil.which(n, path=path_env) for n in names)
        out.append((p, raw.get("display_name", p), ok))
    return out


def allowed_modes(ctx) -> tuple[tuple[str, ...], str]:
    from . import config

    cfg = config.load(ctx.paths.config_file)
    return cfg.allowed_modes, cfg.default_mode


def start_menu(ctx, client: str | None, pane: str | None) -> list[str]:
    tmux = ctx.tmux
    cwd = tmux.pane_option(pane, "pane_current_path") if pane else ""
    cwd = cwd or ctx.env.get("PWD") or os.getcwd()
    modes, default = allowed_modes(ctx)
    args = ["display-menu", *(["-c", client] if client else []), *(["-t", pane] if pane else []),
            "-T", tmux_quote_title(f"tmuxjail: start in {_short_path(cwd, ctx.env)}"), "-x", "C", "-y", "C"]
    keys = iter(KEYS)
    for provider, display, installed in providers():
        for mode in modes:
            label = f"{provider:<12} {mode}{' (default)' if mode == default else ''}"
            if not installed:
                args += [f"-{label}   not installed", "", ""]
                continue
            cmd = ["start", provider, "--mode", mode, "--workspace", cwd]
            if client:
                cmd += ["--client", client]
            args += [label.replace("#", "##"), next(keys, ""), _run_shell(tmux, *cmd)]
        args.append("")  # a separator line between providers (one empty argument)
    while args and args[-1] == "":
        args.pop()
    return args


def resume_menu(ctx, client: str | None, pane: str | None) -> list[str]:
    from .listing import rows

    tmux = ctx.tmux
    args = ["display-menu", *(["-c", client] if client else []), *(["-t", pane] if pane else []),
            "-T", tmux_quote_title("tmuxjail: resume"), "-x", "C", "-y", "C"]
    keys = iter(KEYS)
    found = False
    for d in rows(ctx, activity=False):
        if d["kind"] != "agent" or d["status"] not in ("running", "exited", "gone"):
            continue
        found = True
        label = f"{d['name']:<24} {d['provider']}/{d['mode']}  {d['status']}".replace("#", "##")
        cmd = ["resume", d["name"], *(["--client", client] if client else [])]
        args += [label, next(keys, ""), _run_shell(tmux, *cmd)]
    if not found:
        args += ["-no jailed session on this server", "", ""]
    return args


def tmux_quote_title(s: str) -> str:
    return s.replace("#", "##")


def _short_path(path: str, env: dict) -> str:
    home = env.get("HOME", "")
    if home and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")):]
    return path


def _jail_of(ctx, pane: str | None) -> str:
    if not pane:
        raise UsageError("this action needs -t PANE")
    sid = ctx.tmux.pane_option(pane, "@tmuxjail_id")
    if not sid:
        raise UsageError(f"pane {pane} is not in a jail")
    return sid


def build(ctx, action: str, client: str | None, pane: str | None) -> list[str] | None:
    """The tmux command (argv after `tmux -S socket`) for an action, or None when the action is
    done here (shell)."""
    tmux = ctx.tmux
    me = shlex.join(self_argv(tmux))
    if action == "start":
        return start_menu(ctx, client, pane)
    if action == "resume":
        return resume_menu(ctx, client, pane)
    if action == "list":
        return ["display-popup", *(["-c", client] if client else []), "-w", "90%", "-h", "60%",
                "-T", " tmuxjail list (Esc closes) ", f"{me} list --check --color always"]
    if action == "policy":
        sid = _jail_of(ctx, pane)
        return ["display-popup", *(["-c", client] if client else []), "-w", "90%", "-h", "80%",
                "-T", " tmuxjail policy (Esc closes) ", f"{me} show {shlex.quote(sid)}"]
    if action == "stop":
        sid = _jail_of(ctx, pane)
        row = ctx.readonly_store().find(sid)
        name = row.name if row else sid
        return ["confirm-before", *(["-t", client] if client else []),
                "-p", f"stop jail {name} (kills its panes)? (y/n)".replace("#", "##"),
                _run_shell(tmux, "stop", sid)]
    if action == "shell":
        return None
    raise UsageError(f"unknown menu action {action!r}", hint="one of: " + ", ".join(ACTIONS))


def run(ctx, action: str, client: str | None, pane: str | None, print_only: bool) -> int:
    try:
        argv = build(ctx, action, client, pane)
        if argv is None:  # shell
            from .panes import shell

            sid = _jail_of(ctx, pane)
            if print_only:
                print(shlex.join([*self_argv(ctx.tmux), "shell", sid]))
                return 0
            out = shell(ctx, sid, detach=True)
            ctx.tmux.switch_client(client, out["shell_pane"])
            return 0
        if print_only:
            print(shlex.join(["tmux", "-S", ctx.tmux.socket, *argv]))
            return 0
        if argv[0] == "display-popup":
            # A popup blocks its tmux client until it closes: leave it to tmux.
            subprocess.Popen([ctx.tmux.require(), *ctx.tmux.base, *argv], env=ctx.tmux.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
            return 0
        ctx.tmux.run(*argv)
        return 0
    except TmuxjailError as exc:
        if print_only or not ctx.tmux.inside:
            raise
        msg = f"tmuxjail: {exc.message}".replace("#", "##")
        ctx.tmux.run("display-message", *(["-c", client] if client else []), msg, check=False)
        return exc.code
