"""Snapshots of a directory tree: what certify compares before and after a run, to show that the
real HOME was not touched."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

SMALL = 1 << 20  # files hashed by content in the real-home snapshot (the rest: by lstat incl. ctime)
STATE_NAMES = (".codex", ".claude", ".claude.json", ".pi", ".cursor", ".config", ".local/state",
               ".local/share/cursor-agent", ".agents", ".gitconfig")
Entry = tuple[object, ...]  # what identifies one entry: type, mode, owner, inode, times, size, hash


def digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def snapshot(root: Path, exclude: tuple[str, ...] = (), content: str = "all") -> dict[str, Entry]:
    """Every entry under root: type, mode, owner, size, mtime/ctime (ns), inode, link target, and
    (content="all", or "state" for small files at depth <= 2 or in agent state dirs) its sha256.
    ctime is in the key: the kernel moves it on every write, chmod, link or rename, and userspace
    cannot set it, so an unchanged key with an unchanged content hash means unchanged bytes."""
    out: dict[str, Entry] = {}
    root_s = str(root)
    for dirpath, dirs, files in os.walk(root_s):
        rel_dir = os.path.relpath(dirpath, root_s)
        dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in exclude]
        for name in [*dirs, *files, *([] if rel_dir != "." else ["."])]:
            p = dirpath if name == "." else os.path.join(dirpath, name)
            rel = os.path.relpath(p, root_s)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            key: Entry = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_uid, st.st_gid, st.st_ino,
                          st.st_mtime_ns, st.st_ctime_ns)
            if stat.S_ISREG(st.st_mode):
                key += (st.st_size,)
                wanted = content == "all" or (
                    st.st_size <= SMALL and (rel.count("/") <= 1 or rel.startswith(STATE_NAMES)))
                if wanted:
                    try:
                        key += (digest(p),)
                    except OSError:
                        key += ("unreadable",)
            elif stat.S_ISLNK(st.st_mode):
                key += (os.readlink(p),)
            out[rel] = key
    return out


def changed(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))

