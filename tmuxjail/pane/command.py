"""The pane's own command line, built and recognised here only. A jailed session's pane runs the
launcher (`launcher`); its new windows, splits and `shell` run `tmuxjail _pane` (`extra_pane`),
which execs the same launcher. `list`, `resume` and `stop` recognise our panes by the start
command tmux ran (`kind`); the start-up watch knows the launcher's process by its argv
(`is_launcher`). Stdlib only: the CLI, the menus and the launcher all import it."""

from __future__ import annotations

import os

from .. import hostos

PANE_VERB = "_pane"  # the hidden command (cli/app.py HIDDEN: commands/pane.py)
LAUNCHER = "tmuxjail.pane.launch"
STUB = "import sys; sys.path[:0] = [{root!r}]; from tmuxjail.pane.launch import main; main(sys.argv[1:])"
# Panes started before the launcher moved into tmuxjail/pane/ ran `from tmuxjail.launch import
# main`: still ours after an upgrade (their fingerprint is checked as any other's).
# Under the macOS seam (tmuxjail.testing.darwin, tests only) the launcher starts through the seam
# with the stand-in's path first: SEAM_STUB, argv `--sandbox-exec PATH --fp FP SPEC`.
SEAM_STUB = ("import sys; sys.path[:0] = [{root!r}]; from tmuxjail.testing.darwin import launch; "
             "launch(sys.argv[1:])")
LAUNCHER_MARKS = (LAUNCHER, "tmuxjail.launch", "tmuxjail.testing.darwin import launch")
PANE_MARK = f" {PANE_VERB} "


def launcher(python: str, fp: str, spec: str) -> list[str]:
    """The pane's argv: the launcher, from the installed package the caller runs."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # -I: no PYTHON* variables and, above all, not the cwd on sys.path: the pane starts in the
    # workspace, where the agent could plant json.py for this process, which runs outside the jail.
    if (stand_in := hostos.seam()) is not None:
        return [python, "-I", "-S", "-c", SEAM_STUB.format(root=root), "--sandbox-exec", stand_in, "--fp", fp, spec]
    return [python, "-I", "-S", "-c", STUB.format(root=root), "--fp", fp, spec]


def tmuxjail(python: str) -> list[str]:
    """How tmux (a pane, a key, a hook) runs tmuxjail again: this interpreter. -E -P: no PYTHON*
    variables, and (unlike plain -m) not the cwd, often the workspace, on sys.path: a `tmuxjail/`
    directory planted there is never imported. Not -I, which would also drop the user site that
    `pip install --user` puts tmuxjail in. Under the macOS seam, through the seam."""
    if (stand_in := hostos.seam()) is not None:
        return [python, "-E", "-P", "-m", "tmuxjail.testing.darwin", "--sandbox-exec", stand_in]
    return [python, "-E", "-P", "-m", "tmuxjail"]


def extra_pane(python: str, sid: str, fp: str) -> list[str]:
    """`tmuxjail _pane`: what a new pane of a jailed session runs (commands/pane.py)."""
    return [*tmuxjail(python), PANE_VERB, "--id", sid, "--fp", fp]


def is_session_id(text: str) -> bool:
    """A session id as the store makes them (store.new_id): a lowercase uuid4's text."""
    return (len(text) == 36 and all(text[i] == "-" for i in (8, 13, 18, 23))
            and all(c in "0123456789abcdef" for i, c in enumerate(text) if i not in (8, 13, 18, 23)))


def hook_command(sid: str) -> str:
    """The pane-died hook of an owned strict session: a tmux command holding only the session id
    (checked to be a uuid) and our interpreter's path, escaped for tmux's parser (inside double
    quotes) and for run-shell's format expansion (# doubled)."""
    import shlex
    import sys

    if not is_session_id(sid):
        raise ValueError(f"not a session id: {sid!r}")
    sh = shlex.join([*tmuxjail(sys.executable), "_audit", "--id", sid])
    sh = f"exec {sh} </dev/null >/dev/null 2>&1"
    for a, b in (("\\", "\\\\"), ('"', '\\"'), ("$", "\\$"), ("#", "##")):
        sh = sh.replace(a, b)
    return f'run-shell -b "{sh}"'


def session_hooks(sid: str, mode: str) -> dict[str, str]:
    """An owned session's hooks: a strict jail audits its workspaces when its pane dies."""
    return {} if mode == "compatibility" else {"pane-died": hook_command(sid)}


def pane_options(sid: str, fp: str, mode_shown: str, provider: str, branch: str | None = None) -> dict[str, str]:
    """The options a jailed pane (and an owned session) carries: what list, the status line and
    the keys read (a worktree session's branch too). Never trusted alone: kind() reads the
    fingerprint from the start command."""
    out = {"@tmuxjail_id": sid, "@tmuxjail_fp": fp, "@tmuxjail_mode": mode_shown, "@tmuxjail_provider": provider}
    if branch:
        out["@tmuxjail_branch"] = branch
    return out


def session_options(python: str, sid: str, fp: str) -> dict[str, str]:
    """An owned session's default-command (tmux runs it with `default-shell -c`): new windows and
    splits open inside the same jail."""
    import shlex

    return {"default-command": "exec " + shlex.join(extra_pane(python, sid, fp))}


def is_launcher(cmdline: str) -> bool:
    """A process's command line (NULs or spaces between words) is the launcher's."""
    return any(m in cmdline for m in LAUNCHER_MARKS)


def kind(start_command: str, fp: str | None) -> str | None:
    """"agent" for the launcher of this fingerprint, "shell" for a `_pane` of it, else None.
    The fingerprint must be in the pane's own start command: options can be set by anyone who
    reaches the tmux server, and are lost on a restart; the start command is what tmux ran."""
    if not fp or f"--fp {fp}" not in start_command:
        return None
    if is_launcher(start_command):
        return "agent"
    if PANE_MARK in start_command:
        return "shell"
    return None
