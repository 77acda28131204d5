"""Which program an identity names, pinned where the mutation run (issue 29) found no test that
noticed a change: the native binary npm's launcher itself would run, an install root that is
never the home, and a hash ahead that fails quietly (the start hashes again and says why)."""

from __future__ import annotations

import hashlib
import os
import platform
import threading

import pytest

from tmuxjail import identity
from tmuxjail.adapters import get as adapter


def _exe(path, data=b"\x7fELF", mode=0o755):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


def test_the_native_binary_is_the_one_the_npm_launcher_would_run(tmp_path, home):
    """Node resolves codex.js's optional dependency from the package's own node_modules before
    the hoisted one above it: when both hold a binary, the nested one is what runs, and so what is
    named, hashed and approved."""
    if platform.machine() != "x86_64":
        pytest.skip("layout written for x86_64")
    mods = tmp_path / "lib/node_modules"
    pkg = mods / "@openai/codex"
    launcher = _exe(pkg / "bin/codex.js", b"#!/usr/bin/env node\n")
    rel = "codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    nested = _exe(pkg / "node_modules/@openai" / rel, b"\x7fELF nested")
    hoisted = _exe(mods / "@openai" / rel, b"\x7fELF hoisted")
    r = identity.resolve(adapter("codex"), launcher, "/usr/bin:/bin", None)
    assert r.identity.path == str(nested) and r.argv == [str(nested)]
    assert r.identity.sha256 == "sha256:" + hashlib.sha256(b"\x7fELF nested").hexdigest()
    nested.chmod(0o644)  # not runnable: the next candidate
    assert identity.locate(adapter("codex"), launcher, "").real == hoisted
    nested.unlink()
    nested.mkdir()  # a directory (searchable, so "executable") is no binary either
    assert identity.locate(adapter("codex"), launcher, "").real == hoisted


def test_a_codex_package_file_below_the_home_never_makes_the_home_a_root(tmp_path, home):
    """codex-package.json marks a root two levels above itself: one planted at ~/a/b would make the
    whole home the CLI's install root (read-only in strict jails, and refused there)."""
    real = _exe(home / "a" / "b" / "codex")
    (real.parent / "codex-package.json").write_text('{"version": "0.1"}')
    at = identity.locate(adapter("pi"), real, "")
    assert at.install_roots == (str(real),) and at.version == "unknown"
    real = _exe(home / "a" / "codex")  # two levels above ~/a is the home's parent
    (real.parent / "codex-package.json").write_text('{"version": "0.1"}')
    assert identity.locate(adapter("pi"), real, "").install_roots == (str(real),)
    deeper = _exe(home / "x" / "a" / "b" / "codex")  # below the home: fine
    (deeper.parent / "codex-package.json").write_text('{"version": "0.2"}')
    at = identity.locate(adapter("pi"), deeper, "")
    assert at.install_roots == (str(home / "x"),) and at.version == "0.2"


def test_a_hash_ahead_that_fails_fails_quietly(tmp_path, monkeypatch):
    """The thread hashing ahead gives up without a traceback on the user's terminal when the file
    changes under it or cannot be read: the start hashes it again and, if it fails again, says so
    in one line."""
    exe = _exe(tmp_path / "cli", os.urandom(3 * identity.CHUNK + 17))
    before = exe.read_bytes()
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))

    class Grows:
        def get_digest(self, path, key):  # after the key was taken: the file grows
            with open(exe, "ab") as f:
                f.write(b"more")

        def put_digest(self, path, key, digest):
            pass

    identity.hash_ahead([exe], Grows())
    ahead = identity._AHEAD[str(exe)]
    ahead.thread.join()
    assert ahead.digest is None and raised == []
    assert identity.sha256_file(exe, None) == "sha256:" + hashlib.sha256(before + b"more").hexdigest()
    # A path that cannot be read (here: it became a directory, which opens but does not read).
    gone = tmp_path / "gone"
    gone.mkdir()
    identity.hash_ahead([gone], None)
    ahead = identity._AHEAD.pop(str(gone))
    ahead.thread.join()
    assert ahead.digest is None and raised == []
