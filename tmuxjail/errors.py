"""Errors that reach the user as one line and an exit code."""

OK = 0
ERROR = 1
USAGE = 2
REFUSED = 3
NOT_APPROVED = 4
SANDBOX_UNAVAILABLE = 5
FINDINGS = 6  # `tmuxjail audit`: something the host would run or trust; not an error


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
