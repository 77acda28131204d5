"""canon: the fingerprint and the launch spec's parser call json's C accelerator directly (the
launcher must not import json: issue 18.3). They must agree with json exactly, or a fingerprint
would differ between the CLI (policy.py) and the launcher, and a spec would parse differently."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmuxjail import canon
from tmuxjail.sandbox import HostLayout

TEXT = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", "\x00", "\x1f\n\t\"\\", "é", "\u2028", "\U0001f600", "#{pane_id}", "/home/u/café"])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
           | st.floats(allow_nan=True, allow_infinity=True) | TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                      max_leaves=25)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_canonical_json_is_json_dumps(value):
    assert canon.canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"),
                                                     ensure_ascii=False)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.sampled_from(["", " ", "\n", " \t\r\n "]))
def test_loads_is_json_loads(value, ws):
    for text in (json.dumps(value), canon.canonical_json(value)):
        data = (ws + text + ws).encode()
        assert _same(canon.loads(data), json.loads(data))


def test_fingerprint_of_a_policy_is_unchanged():
    pol = {"mode": "isolated", "workspaces": ["/home/u/café"], "env_set": {"A": "1"}, "n": 3, "x": None}
    text = json.dumps(pol, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    import hashlib

    assert canon.fingerprint(pol) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("bad", [b"", b"   ", b"{", b'{"a": 1} x', b'{"a": 1}{}', b"\xff{}", b"[1,]", b"{'a': 1}",
                                 b'{"a": 1}\x00'])
def test_loads_refuses_what_json_loads_refuses(bad):
    def refused(loads) -> bool:
        try:
            loads(bad)
        except ValueError:
            return True
        return False

    assert refused(json.loads) and refused(canon.loads)


def test_unserializable_is_a_type_error():
    with pytest.raises(TypeError):
        canon.canonical_json({"a": object()})


def test_host_layout_is_a_frozen_record():
    a = HostLayout(top={"/bin": "usr/bin"}, tmux_dirs=("/tmp/tmux-1",))
    assert a == HostLayout(top={"/bin": "usr/bin"}, tmux_dirs=("/tmp/tmux-1",)) and a != HostLayout()
    assert a.asdict()["top"] == {"/bin": "usr/bin"} and a.asdict()["top"] is not a.top
    assert list(a.asdict()) == list(HostLayout.FIELDS) and HostLayout(**a.asdict()) == a
    with pytest.raises(AttributeError):
        a.tty = "/dev/pts/1"  # type: ignore[misc]
    with pytest.raises(TypeError):
        HostLayout(nope=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("klen", [0, 1, 32, 64, 65, 200])
def test_hmac_sha256_is_the_hmac_modules(klen):
    """The policy cache's MAC without the hmac module (which loads OpenSSL): the same bytes."""
    import hmac
    import os

    for blen in (0, 1, 63, 64, 1000):
        key, body = os.urandom(klen), os.urandom(blen)
        assert canon.hmac_sha256(key, body) == hmac.new(key, body, "sha256").hexdigest()


def test_same_is_equality():
    assert canon.same(b"abc", b"abc") and canon.same(b"", b"")
    assert not canon.same(b"abc", b"abd") and not canon.same(b"abc", b"ab") and not canon.same(b"a", b"")
