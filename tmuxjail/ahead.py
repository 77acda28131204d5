"""Work started ahead in a child process, so that it runs on another core while this one imports
and resolves (a thread would not: the main thread holds the GIL through the imports). The child
computes fn(*args), writes it as marshal data to a pipe only the two hold, and leaves without
running anything of the parent's. A child that failed, or an answer of the wrong shape, is no
answer: the caller then does the work itself, so an answer ahead is never less than one made here.

Fork before starting threads: the child runs fn only, with modules the parent imported already."""

from __future__ import annotations

import marshal
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Ahead:
    """A child's work under way: result() takes its answer, once."""

    __slots__ = ("fd", "pid")

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd

    def cancel(self) -> None:
        """Not wanted after all: the child is killed and reaped, its pipe closed."""
        try:
            os.kill(self.pid, 9)
        except OSError:
            pass
        self.result()

    def result(self) -> object | None:
        """The child's answer; None when it failed (the caller does the work itself)."""
        try:
            with os.fdopen(self.fd, "rb") as f:
                data = f.read()
            _, status = os.waitpid(self.pid, 0)
        except OSError:
            return None
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        try:
            return marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            return None


def start(fn: Callable[..., Any], *args: object) -> Ahead | None:
    """fn(*args) under way in a child; None when no child can be made (out of processes or
    descriptors): the caller then does the work itself."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: compute, write, exit without running anything of the parent's
        code = 1
        try:
            os.close(r)
            data = marshal.dumps(fn(*args))
            while data:
                data = data[os.write(w, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return Ahead(pid, r)
