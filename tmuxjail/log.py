"""structlog: JSON lines to a size-capped log file in the state dir; human lines on stderr with -v.
Only names and fingerprints are logged, never environment values."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

MAX_BYTES = 2 * 1024 * 1024
_logger = None


_pending: tuple | None = None


def setup(log_file: Path, verbose: bool) -> None:
    """Say where to log. The file opens at the first event; structlog itself (~100 ms of
    imports) loads only with -v, for its human lines on stderr."""
    global _pending
    _pending = (log_file, verbose)


class _Lines:
    """The JSON lines structlog's JSONRenderer writes with our processors (level, ISO UTC
    timestamp, sorted keys), without loading structlog (~100 ms): the file alone needs none of it."""

    def __init__(self, sink):
        self.sink = sink

    def _write(self, level: str, event: str, kw: dict) -> None:
        import json

        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
        self.sink.write(json.dumps({**kw, "event": event, "level": level, "timestamp": stamp},
                                   sort_keys=True, default=repr) + "\n")

    def info(self, event: str, **kw) -> None:
        self._write("info", event, kw)

    def warning(self, event: str, **kw) -> None:
        self._write("warning", event, kw)


def _configure(log_file: Path, verbose: bool) -> None:
    global _logger
    log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if log_file.stat().st_size > MAX_BYTES:
            os.replace(log_file, log_file.with_suffix(".log.1"))
    except FileNotFoundError:
        pass
    fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    sink = os.fdopen(fd, "a", buffering=1)
    if not verbose:
        _logger = _Lines(sink)
        return
    import structlog

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
