"""The policy cache (tmuxjail.policycache) takes back only what it wrote itself, never errs, and a
lookup writes nothing: the survivors of its mutation run (issue 29), each written as the forged,
stale or odd file it would let through. Real files in a temporary state dir; where a failure can
only come from the disk or from another start racing this one, that moment is made by hand
(`_at`, `_failing`) and the rest stays real."""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
from pathlib import Path

import pytest

from tmuxjail.policycache import DIR, KEY_FILE, MAX_BYTES, MAX_ENTRIES, PolicyCache

ENTRY = {"policy": {"mode": "isolated", "workspace_write": ["/home/u/src"]}, "fingerprint": "sha256:x"}


def _k(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def _cache(tmp_path) -> tuple[PolicyCache, Path, bytes]:
    """A cache holding one entry under _k("a"); its dir and MAC key."""
    cache = PolicyCache(tmp_path)
    assert cache.put(_k("a"), ENTRY) is True
    d = tmp_path / DIR
    return cache, d, (d / KEY_FILE).read_bytes()


def _signed(mac_key: bytes, body: bytes) -> bytes:
    return hmac.new(mac_key, body, "sha256").hexdigest().encode() + b"\n" + body


def _plant(path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _failing(monkeypatch, name: str, under, err: int = errno.EIO) -> None:
    """os.<name> fails with err for paths (or fds) under `under`, as a failing disk would."""
    real = getattr(os, name)

    def fake(target, *a, **kw):
        where = os.readlink(f"/proc/self/fd/{target}") if isinstance(target, int) else os.fspath(target)
        if where.startswith(os.fspath(under)):
            raise OSError(err, os.strerror(err), where)
        return real(target, *a, **kw)

    monkeypatch.setattr(os, name, fake)


# -- what reads as absent ------------------------------------------------------------------------

def test_an_entry_whose_body_was_changed_under_its_old_mac_is_a_miss(tmp_path):
    """Whatever writes the user's files (a restored backup, a copy from another account, an
    agent of an unsandboxed run) may edit an entry, e.g. widen its policy; without the MAC key
    the signature no longer matches and the start resolves in full."""
    cache, d, mac_key = _cache(tmp_path)
    k = _k("a")
    mac, _, body = (d / f"{k}.json").read_bytes().partition(b"\n")
    _plant(d / f"{k}.json", mac + b"\n" + body.replace(b"/home/u/src", b"/"))
    assert cache.get(k) is None
    other = secrets.token_bytes(32)  # another user's tmuxjail, or a key since replaced
    _plant(d / f"{k}.json", _signed(other, json.dumps({**ENTRY, "key": k}).encode()))
    assert cache.get(k) is None
    _plant(d / f"{k}.json", _signed(mac_key, json.dumps({**ENTRY, "key": k}).encode()))
    assert cache.get(k) == {**ENTRY, "key": k}  # the same body under this cache's key is taken


@pytest.mark.parametrize("body", [b"not json {", b"[" * 100_000 + b"]" * 100_000], ids=["garbage", "deep"])
def test_a_signed_body_that_does_not_parse_is_a_miss_not_an_error(tmp_path, body):
    """A signed body is what some tmuxjail wrote under this key: a version that wrote another
    format, or a writer that also holds the key. If it does not parse (or nests deeper than the
    parser goes) the start resolves in full rather than dying with a traceback."""
    cache, d, mac_key = _cache(tmp_path)
    _plant(d / f"{_k('a')}.json", _signed(mac_key, body))
    assert cache.get(_k("a")) is None


@pytest.mark.parametrize("victim", ["entry", "key"])
def test_an_entry_or_key_reached_through_a_symlink_is_not_taken(tmp_path, victim):
    """Only the files in the cache's own directory count. A link planted in their place, to a
    perfectly valid file of ours elsewhere, reads as absent, so nobody who can make a link in
    that directory chooses the entry or the MAC key a start trusts."""
    cache, d, _ = _cache(tmp_path)
    name = f"{_k('a')}.json" if victim == "entry" else KEY_FILE
    elsewhere = tmp_path / "elsewhere"
    os.replace(d / name, elsewhere)
    (d / name).symlink_to(elsewhere)
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o600
    assert cache.get(_k("a")) is None
    if victim == "key":  # the link is left alone: no entry is made under a key it names
        assert cache.put(_k("b"), ENTRY) is False
        assert (d / name).is_symlink() and not (d / f"{_k('b')}.json").exists()


@pytest.mark.parametrize("victim", ["entry", "key"])
def test_a_fifo_in_place_of_an_entry_or_key_never_hangs_a_start(tmp_path, victim):
    """A FIFO planted under an entry's (or the key's) name: opening it to read waits for a writer
    that never comes, so every later start would hang. It reads as absent at once."""
    cache, d, _ = _cache(tmp_path)
    name = f"{_k('a')}.json" if victim == "entry" else KEY_FILE
    (d / name).unlink()
    os.mkfifo(d / name, 0o600)
    got: list = []
    t = threading.Thread(target=lambda: got.append(cache.get(_k("a"))), daemon=True)
    t.start()
    t.join(60)  # only a hang guard: the real lookup returns at once
    if t.is_alive():
        fd = os.open(d / name, os.O_WRONLY | os.O_NONBLOCK)  # release the reader
        os.close(fd)
        t.join(10)
        pytest.fail("the lookup blocked opening a FIFO")
    assert got == [None]


def test_an_entry_or_key_others_can_read_or_write_is_not_taken(tmp_path):
    cache, d, _ = _cache(tmp_path)
    k = _k("a")
    (d / f"{k}.json").chmod(0o640)
    assert cache.get(k) is None
    (d / f"{k}.json").chmod(0o600)
    assert cache.get(k) is not None
    (d / KEY_FILE).chmod(0o644)
    assert cache.get(k) is None


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
@pytest.mark.parametrize("victim", ["entry", "key"])
def test_an_entry_or_key_owned_by_another_user_is_not_taken(tmp_path, victim):
    """A file of another account in the cache's place (a copy restored as that user, a link
    made where hard links to others' files are allowed) is not one this user's tmuxjail wrote."""
    cache, d, _ = _cache(tmp_path)
    name = f"{_k('a')}.json" if victim == "entry" else KEY_FILE
    os.chown(d / name, 65534, 65534)
    assert stat.S_IMODE((d / name).stat().st_mode) == 0o600
    assert cache.get(_k("a")) is None


def test_a_cache_dir_others_can_use_is_neither_read_nor_written(tmp_path):
    """A policies dir that the group or others can write lets them swap entries and the key:
    nothing in it is taken, and nothing is written there."""
    cache, d, _ = _cache(tmp_path)
    for mode in (0o770, 0o755, 0o707):
        d.chmod(mode)
        assert cache.get(_k("a")) is None, oct(mode)
        assert cache.put(_k("b"), ENTRY) is False, oct(mode)
        assert not (d / f"{_k('b')}.json").exists()
    d.chmod(0o700)
    assert cache.get(_k("a")) is not None


def test_only_a_digest_names_an_entry(tmp_path):
    """A key is 64 lowercase hex digits, nothing else: never a path that leaves the cache dir,
    nor a shorter or longer name."""
    cache = PolicyCache(tmp_path)
    cache.put(_k("a"), ENTRY)
    for bad in ("../" + "0" * 61, "0" * 63, "0" * 65, "ab", "0" * 63 + "/", "0" * 63 + "G"):
        assert cache.put(bad, ENTRY) is False, bad
        assert cache.get(bad) is None, bad
    assert sorted(p.name for p in tmp_path.iterdir()) == [DIR]
    assert sorted(p.name for p in (tmp_path / DIR).iterdir()) == sorted([KEY_FILE, f"{_k('a')}.json"])


def test_an_entry_of_exactly_max_bytes_is_kept_whatever_its_script(tmp_path):
    """The bound is MAX_BYTES of file, UTF-8 as written: an entry of that size (here non-ASCII
    paths, two bytes a character) is a hit, one byte more a miss."""
    cache = PolicyCache(tmp_path)
    k = _k("a")
    head = json.dumps({"p": "", "key": k}, ensure_ascii=False, separators=(",", ":")).encode()
    room = MAX_BYTES - 64 - 1 - len(head)  # the MAC's hex and its newline come first
    entry = {"p": "x" * (room % 2) + "é" * (room // 2)}
    assert cache.put(k, entry) is True
    assert (tmp_path / DIR / f"{k}.json").stat().st_size == MAX_BYTES
    assert cache.get(k) == {**entry, "key": k}
    assert cache.put(k, {"p": entry["p"] + "x"}) is True
    assert cache.get(k) is None


# -- a lookup writes nothing -------------------------------------------------------------------

def test_a_lookup_makes_neither_the_cache_dir_nor_its_key(tmp_path):
    """get only reads: on a fresh state dir it leaves no policies dir behind, and in a policies
    dir without a key (a start died before making one) it makes none. The first put makes both."""
    cache = PolicyCache(tmp_path)
    assert cache.get(_k("a")) is None
    assert list(tmp_path.iterdir()) == []
    (tmp_path / DIR).mkdir(mode=0o700)
    assert cache.get(_k("a")) is None
    assert list((tmp_path / DIR).iterdir()) == []
    (tmp_path / DIR).rmdir()
    assert cache.put(_k("a"), ENTRY) is True
    assert stat.S_IMODE((tmp_path / DIR).stat().st_mode) == 0o700
    assert len((tmp_path / DIR / KEY_FILE).read_bytes()) == 32
    assert cache.get(_k("a")) == {**ENTRY, "key": _k("a")}


# -- writes that cannot be made: False, never an error, never through a link ---------------------

@pytest.mark.parametrize("state", ["missing", "a file"])
def test_a_state_dir_that_cannot_hold_the_cache_makes_put_false(tmp_path, state):
    where = tmp_path / "state"
    if state == "a file":
        where.write_text("")
    cache = PolicyCache(where)
    assert cache.put(_k("a"), ENTRY) is False
    assert cache.get(_k("a")) is None


@pytest.mark.parametrize("planted", ["another start's key", "a link"])
def test_a_key_made_by_another_start_meanwhile_is_kept(tmp_path, monkeypatch, planted):
    """Two first starts race to make the MAC key: the one that finds it made between its check
    and its open leaves it as it is (it is the other start's, or a link to some file of the
    user's, which is never written through) and caches nothing this time."""
    d = tmp_path / DIR
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    _plant(victim, b"k" * 32)
    real = os.path.lexists

    def lexists(p):
        if os.fspath(p) == os.fspath(d / KEY_FILE):
            if planted == "a link":
                (d / KEY_FILE).symlink_to(victim)
            else:
                _plant(d / KEY_FILE, b"k" * 32)
            return False
        return real(p)

    monkeypatch.setattr(os.path, "lexists", lexists)
    assert PolicyCache(tmp_path).put(_k("a"), ENTRY) is False
    assert victim.read_bytes() == b"k" * 32
    assert (d / KEY_FILE).read_bytes() == b"k" * 32
    assert not (d / f"{_k('a')}.json").exists()


def test_a_link_at_the_temporary_name_is_never_written_through(tmp_path, monkeypatch):
    """An entry is written to a fresh temporary file, then renamed. Were a link already at that
    name (its random part guessed, here fixed), the write must fail, not go where it points."""
    cache, d, _ = _cache(tmp_path)
    cache._mac_key(create=True)  # the key first: its random bytes are not the name's
    monkeypatch.setattr(os, "urandom", lambda n: b"\0" * n)
    k = _k("b")
    victim = tmp_path / "victim"
    _plant(victim, b"precious")
    (d / f".{k}.json.{'0' * 12}.tmp").symlink_to(victim)
    assert cache.put(k, ENTRY) is False
    assert victim.read_bytes() == b"precious"
    assert cache.get(k) is None and not (d / f"{k}.json").exists()


def test_an_entry_that_cannot_be_put_in_place_leaves_no_temporary_file(tmp_path):
    """A directory squats on the entry's name: the rename fails, put says False, and the
    temporary file is removed (the next start tries again)."""
    cache, d, _ = _cache(tmp_path)
    k = _k("b")
    (d / f"{k}.json").mkdir()
    (d / f"{k}.json" / "x").write_text("")
    assert cache.put(k, ENTRY) is False
    assert sorted(p.name for p in d.iterdir()) == sorted([KEY_FILE, f"{_k('a')}.json", f"{k}.json"])
    assert cache.get(k) is None


def test_a_temporary_file_removed_by_someone_else_meanwhile_is_no_error(tmp_path, monkeypatch):
    """Something else removes the temporary file before the rename (a cleaner of stale files):
    the rename and the clean-up both fail, and put just says False."""
    cache, _, _ = _cache(tmp_path)
    real = os.replace

    def replace(src, dst, *a, **kw):
        if os.fspath(src).endswith(".tmp"):
            os.unlink(src)
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", replace)
    assert cache.put(_k("b"), ENTRY) is False
    assert cache.get(_k("b")) is None


def test_a_disk_error_reading_an_entry_is_a_miss(tmp_path, monkeypatch):
    cache, d, _ = _cache(tmp_path)
    _failing(monkeypatch, "read", d / f"{_k('a')}.json")
    assert cache.get(_k("a")) is None


# -- the cap on entries --------------------------------------------------------------------------

def _fill(d, n: int, mac_key: bytes, start: int = 0) -> list[str]:
    """n valid entries, the first the oldest; their file names."""
    names = []
    for i in range(start, start + n):
        k = _k(f"fill{i}")
        _plant(d / f"{k}.json", _signed(mac_key, json.dumps({**ENTRY, "key": k}).encode()))
        os.utime(d / f"{k}.json", ns=(10**18 + i * 10**9,) * 2)
        names.append(f"{k}.json")
    return names


def _entries(d) -> set[str]:
    return {p.name for p in d.iterdir() if p.name.endswith(".json")}


def test_the_cache_keeps_the_newest_max_entries(tmp_path):
    """Below the cap nothing is removed; past it the oldest go, down to exactly MAX_ENTRIES, and
    the entry just written stays."""
    cache, d, mac_key = _cache(tmp_path)
    (d / f"{_k('a')}.json").unlink()
    names = _fill(d, MAX_ENTRIES - 1, mac_key)
    assert cache.put(_k("new"), ENTRY) is True
    assert _entries(d) == {*names, f"{_k('new')}.json"}
    names += _fill(d, 1, mac_key, start=MAX_ENTRIES)  # older than the put's
    assert cache.put(_k("newest"), ENTRY) is True
    assert len(_entries(d)) == MAX_ENTRIES
    assert _entries(d) == {*names[2:], f"{_k('new')}.json", f"{_k('newest')}.json"}
    assert cache.get(_k("newest")) is not None


@pytest.mark.parametrize("gone", [1, 3])
def test_entries_removed_by_other_starts_while_pruning_are_skipped(tmp_path, monkeypatch, gone):
    """Starts prune at once: entries listed by this one are gone when it looks at their age. They
    are skipped, the rest are still aged, and the cap still holds; and when so many went that the
    rest are within the cap, nothing more is removed (it once removed all but the newest)."""
    cache, d, mac_key = _cache(tmp_path)
    (d / f"{_k('a')}.json").unlink()
    names = _fill(d, MAX_ENTRIES + 1, mac_key)
    real = os.listdir

    def listdir(p="."):
        got = real(p)
        if os.fspath(p) == os.fspath(d) and names[0] in got:
            for n in names[:gone]:
                os.unlink(d / n)  # the other starts' prunes, just after this listing
            got = [*names[:gone], *(n for n in got if n not in names[:gone])]
        return got

    monkeypatch.setattr(os, "listdir", listdir)
    assert cache.put(_k("new"), ENTRY) is True
    aged = MAX_ENTRIES + 2 - gone
    assert _entries(d) == {*names[gone + max(0, aged - MAX_ENTRIES):], f"{_k('new')}.json"}


def test_an_odd_file_among_the_oldest_is_left_and_the_put_stands(tmp_path):
    """A directory named like an entry, the oldest: it cannot be unlinked, the prune goes on
    past it, and the entry just written is kept."""
    cache, d, mac_key = _cache(tmp_path)
    (d / f"{_k('a')}.json").unlink()
    odd = d / f"{_k('odd')}.json"
    odd.mkdir()
    os.utime(odd, ns=(1, 1))
    names = _fill(d, MAX_ENTRIES, mac_key)
    assert cache.put(_k("new"), ENTRY) is True
    assert odd.is_dir() and cache.get(_k("new")) is not None
    assert _entries(d) == {odd.name, *names[1:], f"{_k('new')}.json"}


def test_a_cache_dir_that_cannot_be_listed_keeps_the_entry_just_put(tmp_path, monkeypatch):
    cache, d, _ = _cache(tmp_path)
    _failing(monkeypatch, "listdir", d)
    assert cache.put(_k("b"), ENTRY) is True
    assert cache.get(_k("b")) is not None
