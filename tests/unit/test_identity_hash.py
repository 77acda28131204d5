"""The executable's digest: hashed ahead in a thread (a cold start overlaps a new CLI's hash with
the rest of its work), taken over only for the very file identity it was computed for, and never
trusted for a file that changed while it was read."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tmuxjail import identity
from tmuxjail.errors import UsageError


class Cache:
    """The digest cache's protocol over a dict (the store implements it over SQLite); `meddle`
    runs on every lookup, after the caller took the file's stat key."""

    def __init__(self, meddle=None):
        self.data: dict = {}
        self.meddle = meddle

    def get_digest(self, path, key):
        if self.meddle:
            self.meddle()
        return self.data.get((path, key))

    def put_digest(self, path, key, digest):
        self.data[(path, key)] = digest


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def exe(tmp_path) -> Path:
    p = tmp_path / "cli"
    p.write_bytes(os.urandom(3 * identity.CHUNK + 17))  # more than one read
    return p


@pytest.fixture
def counted(monkeypatch):
    calls: list[str] = []
    real = identity._digest

    def digest(fd, key, path):
        calls.append(str(path))
        return real(fd, key, path)

    monkeypatch.setattr(identity, "_digest", digest)
    return calls


def test_the_digest_is_the_files_sha256(exe):
    assert identity.sha256_file(exe) == _sha(exe.read_bytes())


def test_a_hash_ahead_is_taken_over_not_done_twice(exe, counted):
    cache = Cache()
    identity.hash_ahead([exe], cache)
    assert identity.sha256_file(exe, cache) == _sha(exe.read_bytes())
    assert counted == [str(exe)]
    assert cache.data  # and remembered under the file's stat identity
    assert identity.sha256_file(exe, cache) == _sha(exe.read_bytes()) and counted == [str(exe)]


def test_a_file_replaced_after_its_hash_ahead_is_hashed_again(exe, counted):
    identity.hash_ahead([exe], None)
    identity._AHEAD[str(exe)].thread.join()
    new = exe.with_name("new")
    new.write_bytes(b"another version")
    new.chmod(0o755)
    os.replace(new, exe)
    assert identity.sha256_file(exe, None) == _sha(b"another version")
    assert counted == [str(exe), str(exe)]


def test_a_file_that_changes_while_hashed_ahead_is_hashed_again_not_trusted(exe):
    before = exe.read_bytes()

    def grow():
        with open(exe, "ab") as f:
            f.write(b"more")

    identity.hash_ahead([exe], Cache(meddle=grow))  # it changes after the key was taken
    identity._AHEAD[str(exe)].thread.join()
    assert identity.sha256_file(exe, Cache()) == _sha(before + b"more")


def test_a_file_that_changes_while_hashed_is_refused(exe):
    grown = []

    def grow():
        if not grown:
            grown.append(1)
            with open(exe, "ab") as f:
                f.write(b"more")

    with pytest.raises(UsageError, match="changed while it was being hashed"):
        identity.sha256_file(exe, Cache(meddle=grow))


def test_nothing_is_hashed_ahead_that_the_cache_holds(exe, counted):
    cache = Cache()
    identity.sha256_file(exe, cache)
    identity.hash_ahead([exe, exe.with_name("missing")], cache)
    assert counted == [str(exe)] and str(exe) not in identity._AHEAD
