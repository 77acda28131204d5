"""structlog: JSON lines to a size-capped log file in the state dir; human lines on stderr with -v.
Only names and fingerprints are logged, never environment values."""

from __future__ import annotations

import os
import sys
from pathlib import Path

MAX_BYTES = 2 * 1024 * 1024
_logger = None


_pending: tuple | None = None


def setup(log_file: Path, verbose: bool) -> None:
    """Say where to log. structlog itself (~100 ms of imports) loads at the first event, which
    comes after the jail is launched, so it never delays the CLI."""
    global _pending
    _pending = (log_file, verbose)


def _configure(log_file: Path, verbose: bool) -> None:
    global _logger
    import structlog

    log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if log_file.stat().st_size > MAX_BYTES:
            os.replace(log_file, log_file.with_suffix(".log.1"))
    except FileNotFoundError:
        pass
    fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    sink = os.fdopen(fd, "a", buffering=1)
    to_file = structlog.PrintLogger(sink)
    to_err = structlog.PrintLogger(sys.stderr) if verbose else None
    render_json = structlog.processors.JSONRenderer(sort_keys=True)
    render_human = structlog.dev.ConsoleRenderer(colors=False)

    def tee(logger, method, event):
        if to_err is not None:
            to_err.msg(render_human(logger, method, dict(event)))
        return render_json(logger, method, event)

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            tee,
        ],
        logger_factory=lambda *a: to_file,
        cache_logger_on_first_use=False,
    )
    _logger = structlog.get_logger("tmuxjail")


def _get():
    global _pending
    if _pending is not None:
        args, _pending = _pending, None
        _configure(*args)
    return _logger


def info(event: str, **kw) -> None:
    if (logger := _get()) is not None:
        logger.info(event, **kw)


def warning(event: str, **kw) -> None:
    if (logger := _get()) is not None:
        logger.warning(event, **kw)
