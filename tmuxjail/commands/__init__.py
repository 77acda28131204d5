"""One thin module per verb. A handler takes a Call and returns a render.Result; commands/table.py declares
each command's handler and arguments; cli/app.py imports a handler's module only when it runs."""

from __future__ import annotations

from ..context import Context
from ..tmux import Tmux


class Call:
    """One command line: its parsed arguments, the words after `--`, the tmux server it names,
    and (made on first use) the Context it runs against."""

    def __init__(self, args, passthrough: list[str], json_out: bool, tmux: Tmux):
        self.args, self.passthrough, self.json, self.tmux = args, passthrough, json_out, tmux
        self._ctx: Context | None = None

    @property
    def ctx(self) -> Context:
        if self._ctx is None:
            self._ctx = Context(tmux=self.tmux)
        return self._ctx

    def opt(self, name: str, default=None):
        return getattr(self.args, name, default)
