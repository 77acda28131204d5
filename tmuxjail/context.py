"""What a command runs against: one tmux server, the caller's environment, the paths, the store;
and which server a recorded session lives on."""

from __future__ import annotations

import os

from . import paths as paths_mod
from .errors import TmuxjailError
from .tmux import Tmux

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from .store import Store


class Context:
    """(A plain class, as in store/tmux/paths: dataclasses costs `list` ~15 ms of imports.)"""

    def __init__(self, tmux: Tmux, env: dict | None = None, paths: paths_mod.Paths | None = None):
        self.tmux = tmux
        self.env = dict(os.environ) if env is None else env
        self.paths = paths or paths_mod.get()
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            from .store import Store  # sqlite3: only once a command asks for the store

            self._store = Store(self.paths.store)
        return self._store

    def readonly_store(self) -> Store:
        from .store import Store

        return self._store or Store(self.paths.store, readonly=True)

    def on(self, tmux: Tmux) -> Context:
        """The same caller, against another tmux server."""
        if tmux is self.tmux:
            return self
        other = Context(tmux, self.env, self.paths)
        other._store = self._store
        return other


def server_of(ctx: Context, row) -> Tmux:
    """The tmux server a session was started on, whatever -L/-S/TMUX say today."""
    if not row.tmux_socket or row.tmux_socket == ctx.tmux.socket:
        return ctx.tmux
    return Tmux.at(row.tmux_socket, ctx.env)


def where_it_runs(ctx: Context, row, action: str) -> Context:
    """The context to act on a session in: on its own server. A server that is gone is fine
    (nothing of the session runs any more); one that exists but cannot be reached is refused
    with the command that reaches it, so nothing is started twice or recorded as stopped while
    it still runs."""
    server = server_of(ctx, row)
    why = server.unreachable()
    if why:
        raise TmuxjailError(
            f"{row.name} runs on the tmux server at {row.tmux_socket}, which cannot be reached: {why}",
            hint=f"from a tmux that can reach it: tmux -S {row.tmux_socket} attach -t ={row.tmux_session}"
                 f"   (then: tmuxjail {action} {row.name})")
    return ctx.on(server)
