from __future__ import annotations

from .base import Adapter


class Shell(Adapter):
    """The user's login shell, to try the jail without any agent installed. Which shell runs comes
    from the password database (identity.login_shell), never from $SHELL."""

    def start_argv(self, exe, native_id, extra, home="", cwd=""):
        return [*exe, "-l", *extra]

    def resume_argv(self, exe, native_id, extra, home="", cwd=""):
        return [*exe, "-l"]


ADAPTER = Shell(provider="shell", takes_mcp=True)  # the stub and its config are in the jail
