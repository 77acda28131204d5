"""What really runs: executable resolution, sha256 with a stat-keyed cache, version from package
metadata (never by running the CLI outside the jail)."""

from __future__ import annotations

import json
import os
import pwd
import stat
import threading
from pathlib import Path, PurePosixPath

from .effective import ExecutableIdentity
from .errors import UsageError
from .record import Record

TYPE_CHECKING = False  # typing is not imported at run time (record.py says why)
if TYPE_CHECKING:
    from typing import Protocol

    class DigestCache(Protocol):
        def get_digest(self, path: str, key: tuple[int, ...]) -> str | None: ...
        def put_digest(self, path: str, key: tuple[int, ...], digest: str) -> None: ...

CHUNK = 1 << 20


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    # ctime is in the key: replacing a binary in place with the same size and mtime still moves it.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _digest(fd: int, key: tuple[int, ...], path: Path | str) -> str:
    """The sha256 of the open file, trusted only if its stat key is still `key` after the read."""
    # OpenSSL's sha256: it lets other threads run while it hashes a chunk. Loaded here, when a file
    # is really hashed (~2.5 ms of OpenSSL): a warm start hashes nothing.
    import hashlib

    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    offset = 0
    while n := os.preadv(fd, [buf], offset):
        h.update(view[:n])
        offset += n
    if stat_key(os.fstat(fd)) != key:
        raise UsageError(f"{path} changed while it was being hashed; try again")
    return "sha256:" + h.hexdigest()


class _Ahead:
    """A digest being computed in a thread of its own, from a file opened when it was asked for."""

    def __init__(self, fd: int, key: tuple[int, ...], path: str):
        self.key = key
        self.digest: str | None = None
        self.thread = threading.Thread(target=self._run, args=(fd, path), name="tmuxjail-hash", daemon=True)
        self.thread.start()

    def _run(self, fd: int, path: str) -> None:
        try:
            self.digest = _digest(fd, self.key, path)
        except (OSError, UsageError):
            self.digest = None  # sha256_file hashes again, and says why if it cannot
        finally:
            os.close(fd)


_AHEAD: dict[str, _Ahead] = {}
_AHEAD_LOCK = threading.Lock()


def hash_ahead(paths: list[Path] | list[str], cache: DigestCache | None) -> None:
    """Start hashing, each in a thread, the files whose digest the cache does not hold under
    their stat identity today, so that a start overlaps a new executable's hash with the rest of
    its work. sha256_file takes the result over only for the very stat identity it was computed
    for (the file it opens then is the file that was hashed: the trust of the digest cache)."""
    for path in map(str, paths):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # sha256_file will say why
        try:
            key = stat_key(os.fstat(fd))
            with _AHEAD_LOCK:
                known = path in _AHEAD and _AHEAD[path].key == key
            if known or (cache is not None and cache.get_digest(path, key)):
                os.close(fd)
                continue
        except BaseException:
            os.close(fd)
            raise
        with _AHEAD_LOCK:
            _AHEAD[path] = _Ahead(fd, key, path)


def _taken_over(path: str, key: tuple[int, ...]) -> str | None:
    with _AHEAD_LOCK:
        ahead = _AHEAD.pop(path, None)
    if ahead is None or ahead.key != key:
        return None
    ahead.thread.join()
    return ahead.digest


def sha256_file(path: Path, cache: DigestCache | None = None) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        key = stat_key(os.fstat(fd))
        if cache is not None and (hit := cache.get_digest(str(path), key)):
            return hit
        digest = _taken_over(str(path), key) or _digest(fd, key, path)
        # The file this process will name in the policy is, still, the file that was hashed.
        if stat_key(os.fstat(fd)) != key:
            raise UsageError(f"{path} changed while it was being hashed; try again")
        if cache is not None:
            cache.put_digest(str(path), key, digest)
        return digest
    finally:
        os.close(fd)


class Resolved(Record):
    identity: ExecutableIdentity
    argv: list[str]  # how to start it (interpreter first, for scripts)
    install_roots: tuple[str, ...]  # read-only inside strict jails


def login_shell() -> str:  # the same in pane/spec.py login_shell (the launcher imports nothing of ours)
    shell = pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK) or shell.endswith("nologin"):
        shell = "/bin/sh"
    return shell


def find(names: tuple[str, ...], path_env: str, override: str | None, provider: str) -> Path:
    if override:
        p = Path(override).expanduser()
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise UsageError(f"{provider}: configured executable {p} is not an executable file")
        return p
    for name in names:
        if hit := which(name, path_env):
            return Path(hit)
    raise UsageError(
        f"{provider}: no executable named {' or '.join(names)} found on PATH",
        hint=f"install it, or set [providers.{provider}] executable = \"/path\" in the config",
    )


def which(name: str, path_env: str) -> str | None:
    """The first program named `name` on PATH that execvp would run: an absolute regular file we
    may execute. Anything else is passed over, as execvp passes it (an executable FIFO planted
    there would hang the start on reading its shebang)."""
    for d in path_env.split(os.pathsep):
        hit = os.path.join(d, name)
        if os.path.isabs(hit) and os.path.isfile(hit) and os.access(hit, os.X_OK):
            return hit
    return None


def _package_root(real: Path, levels: int = 4) -> tuple[Path | None, str]:
    home = Path(os.path.expanduser("~"))
    for parent in list(real.parents)[:levels]:
        if parent == home or parent in home.parents:
            break  # a stray ~/package.json must not make the home (or /) a package root
        for meta in ("package.json", "codex-package.json"):
            f = parent / meta
            if f.is_file():
                try:
                    version = str(json.loads(f.read_text())["version"])
                except (OSError, ValueError, KeyError, TypeError):
                    continue
                root = parent.parent.parent if meta == "codex-package.json" else parent
                if root == home or root in home.parents:
                    break
                return root, version
    return None, "unknown"


def _shebang(path: Path) -> list[str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # never wait on a FIFO
    except OSError:
        return []
    try:
        head = os.read(fd, 256) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return []
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


class Located(Record):
    """What runs, before anything is hashed: the real executable, its interpreter (a script's),
    how to start it, what strict jails get read-only of its install, and its package version."""

    real: Path
    interpreter: Path | None
    argv: list[str]
    install_roots: tuple[str, ...]
    version: str


def locate(adapter, found: Path, path_env: str) -> Located:
    """Follow launchers to the real executable (stdlib only: the warm start runs it every time)."""
    real = found.resolve()
    for cand in adapter.native_candidates(PurePosixPath(real), os.uname().machine):
        if Path(cand).is_file() and os.access(cand, os.X_OK):
            real = Path(cand).resolve()
            break
    pkg_root, version = _package_root(real)
    argv = [str(real)]
    interp_real = None
    roots: list[str] = []
    shebang = _shebang(real)
    if shebang:
        interp = shebang[1] if Path(shebang[0]).name == "env" and len(shebang) > 1 else shebang[0]
        interp_path = which(interp, path_env) if not os.path.isabs(interp) else interp
        if not interp_path or not os.path.isfile(interp_path):
            raise UsageError(f"{found}: its interpreter {interp!r} cannot be found")
        interp_real = Path(interp_path).resolve()
        argv = [str(interp_real), str(real)]
        roots.append(str(interp_real))
    if pkg_root is not None and shebang and "node_modules" in pkg_root.parts:
        # A script run by Node resolves its dependencies from every node_modules above it, and npm
        # hoists them out of the package (observed: pi 0.73.1 imports undici from
        # <prefix>/node_modules): expose the outermost node_modules directory.
        top = pkg_root.parts.index("node_modules")
        roots.insert(0, str(Path(*pkg_root.parts[: top + 1])))
    elif pkg_root is not None:
        roots.insert(0, str(pkg_root))
    elif adapter.install_root_is_dir:
        roots.insert(0, str(real.parent))
    else:
        roots.insert(0, str(real))
    return Located(real, interp_real, argv, tuple(roots), version)


def resolve(adapter, found: Path, path_env: str, cache: DigestCache | None) -> Resolved:
    """Follow launchers to the real executable, and identify it (and its interpreter)."""
    return identify(locate(adapter, found, path_env), cache)


def identify(at: Located, cache: DigestCache | None) -> Resolved:
    """A located executable (and its interpreter), hashed."""
    extra = [] if at.interpreter is None else [(str(at.interpreter), sha256_file(at.interpreter, cache))]
    ident = ExecutableIdentity(
        path=str(at.real), sha256=sha256_file(at.real, cache), version=at.version, extra=tuple(extra)
    )
    return Resolved(identity=ident, argv=at.argv, install_roots=at.install_roots)
