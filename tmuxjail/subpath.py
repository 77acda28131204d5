"""Is this path inside that root: the sandbox's key predicate, in one place. It imports
nothing at run time, so the launcher in the pane and the network wing use it as the core does.

The answer is read from the text alone (no filesystem access, no symlink resolution):
- Both paths are expected absolute and normalised (what realpath and normpath give); they are not
  normalised here. A relative pair is compared the same way, as text.
- A root is inside itself (`inside`); `below` is the strict form (root itself excluded).
- Only whole components count: /a/bc is not inside /a.
- Trailing slashes are ignored on both sides: /a/ is the root /a, and /a/b/ is inside it.
- The root / holds every absolute path; an empty root holds nothing.
- A path with a `..` component past the root is never inside it (/a/../etc is not inside /a):
  the text cannot tell where it leads, so the answer is no rather than a guess.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported: the launcher uses this on every start
if TYPE_CHECKING:
    from collections.abc import Iterable


def _rest(path: str, root: str) -> str | None:
    """What path has beyond root ("" for root itself), or None when it is not inside."""
    if not root or not path:
        return None
    base = root.rstrip("/")
    if path.rstrip("/") == base:
        return ""
    if not path.startswith(base + "/"):
        return None
    rest = path[len(base) + 1:]
    if ".." in rest and ".." in rest.split("/"):
        return None
    return rest


def inside(path: str, root: str) -> bool:
    """path is root or below it."""
    return _rest(path, root) is not None


def below(path: str, root: str) -> bool:
    """path is strictly below root (root itself is not)."""
    return bool(_rest(path, root))


def inside_any(path: str, roots: Iterable[str]) -> bool:
    """path is one of roots or below one of them."""
    return any(_rest(path, r) is not None for r in roots)
