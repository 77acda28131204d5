"""The warm start (tmuxjail.warm) over a filled cache, in process against the installed package
with real bubblewrap checks and a real store (the World of test_warm_cache.py): the survivors of
its mutation run (issue 29) that need a whole resolution. The cheap ones: tests/unit/test_kills_warm.py."""

from __future__ import annotations

import hmac
import json
import os

import pytest
from test_warm_cache import BASE, _only_entry, hit_then_same, same, world  # noqa: F401 - world: a fixture

from tmuxjail import identity, policycache
from tmuxjail.errors import UsageError

pytestmark = pytest.mark.integration


def test_a_signed_entry_whose_policy_is_not_its_fingerprints_is_a_miss(world):  # noqa: F811
    """Under a valid MAC (a writer that holds the key, or a bug) an entry's policy is widened and
    its fingerprint left as it was: the start must not run a policy other than the one its
    fingerprint names (the one it records and shows); it resolves in full."""
    hit_then_same(world, BASE)
    entry = _only_entry(world)
    key = (entry.parent / policycache.KEY_FILE).read_bytes()
    data = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    data["policy"]["hidden"] = []
    body = json.dumps(data, separators=(",", ":")).encode()
    entry.write_bytes(hmac.new(key, body, "sha256").hexdigest().encode() + b"\n" + body)
    got = world.warm(BASE)
    assert not got.hit
    same(got, world.full(BASE))


def test_a_cli_removed_while_a_start_looks_it_up_is_the_full_resolutions_error(world, monkeypatch):  # noqa: F811
    """The CLI is uninstalled while a warm start checks the cached entry's host facts (after it
    is located, before its identity is taken): the start is a miss, and says what a full
    resolution says (no such executable), not an OSError."""
    hit_then_same(world, BASE)
    real = identity.locate

    def locate(adapter, found, path_env):
        at = real(adapter, found, path_env)
        at.real.unlink()  # the uninstall, just now
        return at

    monkeypatch.setattr(identity, "locate", locate)
    with pytest.raises(UsageError, match="no executable named"):
        world.warm(BASE)


def test_a_cli_relinked_while_a_start_looks_it_up_is_resolved_in_full(world, monkeypatch):  # noqa: F811
    """An upgrade relinks the CLI (the old link removed, the new one made) just as a warm start
    checks the cached entry's host facts: that look finds nothing, so the start is a miss, and the
    full resolution that follows finds the CLI again and starts, not the look's error."""
    hit_then_same(world, BASE)
    real, looks = identity.find, []

    def find(*args):
        looks.append(args)
        if len(looks) > 1:
            return real(*args)
        link = world.bin / "pi"
        target = os.readlink(link)
        link.unlink()
        try:
            return real(*args)
        finally:
            link.symlink_to(target)

    monkeypatch.setattr(identity, "find", find)
    got = world.warm(BASE)
    assert len(looks) == 2 and not got.hit
    same(got, world.full(BASE))


def test_a_config_changed_while_a_start_resolves_is_not_remembered(world, monkeypatch):  # noqa: F811
    """The config is edited between the warm start's read of it (the key) and the full
    resolution's: that resolution is the new config's, and must not be remembered under the old
    config's key, where the next start with the old config back would take it."""
    from tmuxjail import plan

    world.write_config("[limits]\nnproc = 444\n")
    real = plan.resolve

    def resolve(*args, **kwargs):
        world.write_config("[limits]\nnproc = 333\n")  # the edit, just now
        return real(*args, **kwargs)

    monkeypatch.setattr(plan, "resolve", resolve)
    world.warm(BASE)
    monkeypatch.setattr(plan, "resolve", real)
    assert world.entries() == []
    world.write_config("[limits]\nnproc = 444\n")
    got = world.warm(BASE)
    assert not got.hit
    same(got, world.full(BASE))
