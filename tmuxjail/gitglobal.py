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


def git_home() -> str:
    """Where your git keeps its global config, attributes and ignores: $XDG_CONFIG_HOME/git."""
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "git")


def configs() -> list[tuple[str, str, list]]:
    """(file, its real path, entries) of your system and global git config and what they include,
    read without running git, as your git reads them in every repository (and last, with no file,
    what your environment sets: environment()): a relative core.hooksPath or core.attributesFile
    there names a path of each repository's work tree."""
    env = os.environ
    files = []
    if env.get("GIT_CONFIG_NOSYSTEM", "").lower() not in ("1", "true", "yes", "on"):
        files.append(env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    if env.get("GIT_CONFIG_GLOBAL"):
        files.append(env["GIT_CONFIG_GLOBAL"])
    else:
        files += [os.path.join(git_home(), "config"), os.path.expanduser("~/.gitconfig")]
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
    if entries := environment(env):
        out.append(("", "", entries))  # (no file: its relative paths are each repository's)
    return out


def environment(env) -> list[tuple[str, str | None]]:
    """The config your environment gives every git command: GIT_CONFIG_COUNT with its
    GIT_CONFIG_KEY_n/VALUE_n, and GIT_CONFIG_PARAMETERS (what `git -c` passes to the git it runs:
    'key'='value' words, shell-quoted)."""
    import shlex

    out: list[tuple[str, str | None]] = []
    try:
        count = min(int(env.get("GIT_CONFIG_COUNT") or 0), 1000)
    except ValueError:
        count = 0
    for i in range(count):
        if f"GIT_CONFIG_KEY_{i}" in env:
            out.append((env[f"GIT_CONFIG_KEY_{i}"].lower(), env.get(f"GIT_CONFIG_VALUE_{i}", "")))
    try:
        words = shlex.split(env.get("GIT_CONFIG_PARAMETERS", ""))
    except ValueError:
        words = []
    for word in words:
        key, eq, value = word.partition("=")
        out.append((key.lower(), value if eq else None))
    return out


def files(configs: list[tuple[str, str, list]]) -> list[str]:
    """The config files themselves, every file they include and the default attributes file
    (as named and resolved), read or not yet there: git reads each of them in every repository."""
    attributes = os.path.join(git_home(), "attributes")
    out: list[str] = [attributes, os.path.realpath(attributes)]
    for name, real, entries in configs:
        out += [p for p in (name, real) if p]
        for key, path in gitconfig.targets(entries, os.path.dirname(name), None):
            if gitconfig.is_include(key):
                out += [path, os.path.realpath(path)]
    return list(dict.fromkeys(out))
