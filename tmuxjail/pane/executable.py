"""The executable: what was hashed is what runs."""

from __future__ import annotations

import os

from .refuse import EXIT_REFUSED, die

TYPE_CHECKING = False  # typing itself is not imported: this runs on every start
if TYPE_CHECKING:
    from typing import Any

    from ..sandbox.bwrap import Call


# -- the executable: what was hashed is what runs ------------------------------------------------
# The start hashed the CLI (and a script's interpreter) and fingerprinted the digests; bubblewrap
# binds the install root later, by path, and the CLI is exec'd by path inside: a session that can
# write the install (compatibility) could swap the file in between. So the launcher opens each file
# once, checks that descriptor against the policy's digest (the identity cache's digest for the
# fd's own stat identity, the cache's trust: identity.sha256_file; else it hashes the fd itself),
# and has bubblewrap bind that descriptor read-only over the path the jail executes.

def open_executables(policy: dict[str, Any]) -> list[tuple[str, str, int, list[int]]]:
    """(path, the policy's sha256, an fd of the file, its stat key) for the CLI and its interpreter."""
    import stat

    ident = policy["executable"]
    out = []
    for path, digest in [(ident["path"], ident["sha256"]), *[tuple(e) for e in ident.get("extra", ())][:1]]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            die(f"cannot open the CLI's executable {path}: {exc.strerror}; refusing", EXIT_REFUSED)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            die(f"the CLI's executable {path} is not a regular file; refusing", EXIT_REFUSED)
        out.append((path, digest, fd, stat_key(st)))
    return out


def stat_key(st: os.stat_result) -> list[int]:
    """identity.stat_key (the digest cache's key), without its imports."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def exe_checked(exe: list[tuple[str, str, int, list[int]]], cached: list[str]) -> None:
    """Each opened file is the one the policy's digest is of: the cache holds that digest for the
    fd's stat identity, or (a file changed since the start, or not cached) hashing the fd gives it."""
    for i, (path, digest, fd, _key) in enumerate(exe):
        if (cached[i] if i < len(cached) else "") == digest:
            continue
        if sha256_fd(fd) != digest:
            die(f"the CLI's executable {path} changed since this session's policy was computed (its "
                "sha256 is not the approved one); refusing to run it", EXIT_REFUSED)


def sha256_fd(fd: int) -> str:
    from ..canon import sha256

    h = sha256()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    offset = 0
    if not hasattr(os, "preadv"):  # (a Python built without it, as for older macOS)
        while data := os.pread(fd, len(buf), offset):
            h.update(data)
            offset += len(data)
        return "sha256:" + str(h.hexdigest())
    while n := os.preadv(fd, [buf], offset):
        h.update(view[:n])
        offset += n
    return "sha256:" + str(h.hexdigest())


def exe_binds(call: Call, exe: list[tuple[str, str, int, list[int]]]) -> None:
    """Each checked fd bound read-only over its path, after every other bind (the install root's
    bind would cover it otherwise)."""
    call.late += [("--ro-bind-fd", str(fd), path) for path, _, fd, _ in exe]


def exe_unchanged(exe: list[tuple[str, str, int, list[int]]]) -> None:
    """Last, before bubblewrap: no file was written in place since it was checked (ctime moves)."""
    for path, _, fd, key in exe:
        if stat_key(os.fstat(fd)) != key:
            die(f"the CLI's executable {path} was modified while this jail was being started; refusing "
                "to run it", EXIT_REFUSED)
