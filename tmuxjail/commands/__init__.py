"""One thin module per verb. A handler takes a Call and returns a render.Result; cli.py maps
command names to handlers (COMMANDS) and imports a handler's module only when it runs."""

from __future__ import annotations

from ..context import Context
from ..tmux import Tmux


class Call:
    """One command line: its parsed arguments, the words after `--`, the tmux server it names,
    and (made on first use) the Context it runs against."""

    def __init__(self, args, passthrough: list[str], json_out: bool, tmux: Tmux, parser=None):
        self.args, self.passthrough, self.json, self.tmux, self.parser = args, passthrough, json_out, tmux, parser
        self._ctx: Context | None = None

    @property
    def ctx(self) -> Context:
        if self._ctx is None:
            self._ctx = Context(tmux=self.tmux)
        return self._ctx

    def opt(self, name: str, default=None):
        return getattr(self.args, name, default)
