"""Where a start puts its jail: the current tmux session's window or pane (`--here`, `--split`),
or a session of its own and its name. Light on purpose: the early pane (early.py) names its
session with these before the policy code is loaded."""

from __future__ import annotations

import os
import re

from ..errors import UsageError
from ..record import Record

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from ..context import Context
    from ..request import StartRequest


class Placement(Record):
    """Where a jail goes when it joins the current tmux session (`--here`, `--split`)."""

    kind: str  # "window" or "split"
    split: str  # "h" or "v"
    target: str  # the window (new-window) or pane (split-window)
    session: str


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


def auto_name(provider: str, workspace: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", os.path.basename(workspace)).strip("-_")[:30] or "ws"
    while True:
        name = f"{provider}-{base}-{os.urandom(2).hex()}"
        if name not in taken:
            return name


def duplicate(name: str) -> UsageError:
    return UsageError(f"a tmux session named {name!r} already exists on this server")


def session_name(ctx: Context, opts: StartRequest) -> str:
    """--name, or a free one made from the provider and the workspace; never the name of a
    stopped session, whose record is kept."""
    store = ctx.store
    name = opts.name or auto_name(opts.provider, opts.workspaces[0], store.names(include_stopped=True))
    old = store.find(name) if opts.name else None
    if old is not None and old.status == "stopped":  # never two records of one name (28.19)
        raise UsageError(f"a stopped session named {name!r} exists (its record and last audit are kept)",
                         hint=f"bring it back with `tmuxjail resume {name}`, or pick another --name "
                              "(`tmuxjail prune` forgets stopped sessions)")
    return name


def cwd(ctx: Context) -> str:
    """Where relative workspaces start from (the shell's $PWD, which keeps its symlinks)."""
    return ctx.env.get("PWD") or os.getcwd()
