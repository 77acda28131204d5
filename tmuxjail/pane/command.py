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
