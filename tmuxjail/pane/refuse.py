"""How the in-pane launcher refuses: one line on stderr (render.fail) and its exit code."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import NoReturn

EXIT_REFUSED = 3
EXIT_UNAVAILABLE = 5


def die(message: str, code: int) -> NoReturn:
    from ..render import fail

    fail(message)
    raise SystemExit(code)
