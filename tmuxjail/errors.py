"""Errors that reach the user as one line and an exit code."""

OK = 0
ERROR = 1
USAGE = 2
REFUSED = 3
NOT_APPROVED = 4
SANDBOX_UNAVAILABLE = 5
FINDINGS = 6  # `tmuxjail audit`: something the host would run or trust; not an error

# Set by the launcher in every jail's environment: a start from inside one is told so, instead of
# meeting tmux's error about a socket the jail cannot see (28.18). Only words for a human: a jail
# may unset it, and nothing relies on it for safety.
INSIDE_JAIL = "INSIDE_TMUXJAIL"


class TmuxjailError(Exception):
    """An error with a one-line message, an exit code, and an optional hint."""

    code = ERROR

    def __init__(self, message: str, *, hint: str | None = None, data: dict | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.data = data or {}


class UsageError(TmuxjailError):
    code = USAGE


class ConfigError(UsageError):
    """The operator config cannot be read or parsed (its own reason, `config`, on resume)."""


class ResumeRefused(TmuxjailError):
    code = REFUSED


class NotApproved(TmuxjailError):
    code = NOT_APPROVED


class SandboxUnavailable(TmuxjailError):
    code = SANDBOX_UNAVAILABLE


def refuse_inside_jail(env, verb: str) -> None:
    if env.get(INSIDE_JAIL):
        raise UsageError(f"you are inside a tmuxjail jail: `tmuxjail {verb}` runs from a terminal outside it",
                         hint="detach (prefix d) or open another terminal on the host, then run it there")
