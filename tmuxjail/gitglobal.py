"""Your system and global git config (and what they include), read without running git: a
relative core.hooksPath or core.attributesFile there names a path of every repository's work
tree, which the start guards (host.guards) and the audit names (scan.Scan). Stdlib only."""

from __future__ import annotations

import os
import stat

from . import gitconfig

MAX_CONFIG = 256 << 10


def read_regular(path: str, limit: int) -> str | None:
    """A regular file's text, never through a link, never blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def configs() -> list[tuple[str, str, list]]:
    """(file, its real path, entries) of your system and global git config and what they include,
    read without running git, as your git reads them in every repository: a relative
    core.hooksPath or core.attributesFile there names a path of each repository's work tree."""
    env = os.environ
    files = []
    if env.get("GIT_CONFIG_NOSYSTEM", "").lower() not in ("1", "true", "yes", "on"):
        files.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    if env.get("GIT_CONFIG_GLOBAL"):
        files.append(env["GIT_CONFIG_GLOBAL"])
    else:
        xdg = env.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        files += [os.path.join(xdg, "git", "config"), os.path.expanduser("~/.gitconfig")]
    out: list[tuple[str, str, list]] = []
    seen: set[str] = set()
    while files and len(seen) < 64:
        name = os.path.expanduser(files.pop(0))
        real = os.path.realpath(name)
        if real in seen:
            continue
        seen.add(real)
        text = read_regular(real, MAX_CONFIG)
        if text is None:
            continue
        entries, _ = gitconfig.parse(text)
        out.append((name, real, entries))
        files += [p for k, p in gitconfig.targets(entries, os.path.dirname(name), None) if gitconfig.is_include(k)]
    return out
