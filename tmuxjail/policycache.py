"""The store of resolved policies (warm.py decides what goes in and when one may be used): one
file per key in tmuxjail's state dir, `<state>/policies/<key>.json`, each authenticated with
HMAC-SHA256 under a random key kept beside them (`<state>/policies/mac.key`, 0600).

Anything that is not exactly what this module wrote for this key reads as absent, never as an
error: a missing, truncated, corrupt or tampered file, one that is a symlink, not a regular file,
not ours, or readable or writable by others, an entry written under another key or by another
user's tmuxjail (another MAC key), and a directory that is not a private one of ours. Writes are
atomic (a private temporary file, then rename), so a reader sees a whole entry or none.

The state dir is hidden from every sandboxed jail (policy: `hidden`), so no agent can reach these
files; the MAC turns whatever else might write them (a restored backup, a bug, a copy from
another account) into a miss. Stdlib only."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from . import canon

DIR = "policies"
KEY_FILE = "mac.key"
MAX_BYTES = 1 << 20  # an entry is a few KB; anything larger was not written by us
MAX_ENTRIES = 256  # oldest removed beyond this
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _private_dir(path: Path, create: bool) -> bool:
    """path is a directory of ours that nobody else can use (made 0700 when missing and create)."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _read_private(path: Path) -> bytes | None:
    """The bytes of a regular file of ours, 0600 or narrower, never through a symlink."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077 \
                or st.st_size > MAX_BYTES:
            return None
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_private(directory: Path, name: str, data: bytes) -> bool:
    """Atomically (re)place directory/name with data, 0600."""
    tmp = directory / f".{name}.{os.urandom(6).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, directory / name)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


class PolicyCache:
    def __init__(self, state_dir: Path):
        self.dir = Path(state_dir) / DIR

    def _mac_key(self, create: bool) -> bytes | None:
        if not _private_dir(self.dir, create):
            return None
        key = _read_private(self.dir / KEY_FILE)
        if key is None and create and not os.path.lexists(self.dir / KEY_FILE):
            fresh = os.urandom(32)
            try:
                fd = os.open(self.dir / KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o600)
            except OSError:
                return None  # another start made it meanwhile: read theirs next time
            with os.fdopen(fd, "wb") as f:
                f.write(fresh)
            return fresh
        return key if key is not None and len(key) == 32 else None

    @staticmethod
    def _sign(mac_key: bytes, body: bytes) -> bytes:
        return canon.hmac_sha256(mac_key, body).encode()

    def get(self, key: str) -> dict | None:
        """The entry stored under key, or None (never an error)."""
        if not _is_key(key):
            return None
        mac_key = self._mac_key(create=False)
        if mac_key is None:
            return None
        raw = _read_private(self.dir / f"{key}.json")
        if raw is None:
            return None
        mac, sep, body = raw.partition(b"\n")
        if not sep or not canon.same(mac, self._sign(mac_key, body)):
            return None
        try:
            entry = canon.loads(body)
        except (ValueError, RecursionError):
            return None
        # Signed under this key, not a valid entry of another key renamed into its place.
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        return entry

    def put(self, key: str, entry: dict) -> bool:
        """Store entry under key (it records the key itself); False when the cache is unusable."""
        if not _is_key(key):
            return False
        mac_key = self._mac_key(create=True)
        if mac_key is None:
            return False
        # Not sorted: a hit hands back the policy in the order a full resolution made it.
        body = json.dumps({**entry, "key": key}, ensure_ascii=False, separators=(",", ":")).encode()
        if not _write_private(self.dir, f"{key}.json", self._sign(mac_key, body) + b"\n" + body):
            return False
        self._prune()
        return True

    def _prune(self) -> None:
        try:
            names = [n for n in os.listdir(self.dir) if n.endswith(".json")]
        except OSError:
            return
        if len(names) <= MAX_ENTRIES:
            return
        aged = []
        for n in names:
            try:
                aged.append((os.lstat(self.dir / n).st_mtime_ns, n))
            except OSError:
                continue
        for _, n in sorted(aged)[: max(0, len(aged) - MAX_ENTRIES)]:  # fewer when some went meanwhile
            try:
                os.unlink(self.dir / n)
            except OSError:
                pass


def _is_key(key: str) -> bool:
    return len(key) == 64 and all(c in "0123456789abcdef" for c in key)
