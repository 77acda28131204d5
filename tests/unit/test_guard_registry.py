"""The guard registry matches the source: every mutation's snippet occurs exactly once, so a
refactor that moves or rewrites a guard fails here (and is re-pinned) instead of silently voiding
its mutation. The mutations themselves run with scripts/mutate.py (CI runs --fast)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _runner():
    spec = importlib.util.spec_from_file_location("tj_mutate", ROOT / "scripts" / "mutate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def mutate():
    if not (ROOT / "guards" / "registry.toml").exists():
        pytest.skip("not run from a source tree")
    return _runner()


def test_every_snippet_is_found_exactly_once(mutate):
    guards = mutate.load()
    assert len(guards) >= 50
    assert mutate.check(guards) == []


def test_every_named_test_file_exists(mutate):
    for g in mutate.load():
        for key in ("tests", "root_tests", "user_tests"):
            for node in g.get(key, ()):
                assert (ROOT / node.split("::")[0]).is_file(), (g["id"], node)


def test_a_snippet_found_twice_or_never_fails_loudly(mutate):
    with pytest.raises(mutate.RegistryError, match="2 times"):
        mutate.mutate("a\na\n", {"file": "f", "find": "a", "replace": "b"}, "x")
    with pytest.raises(mutate.RegistryError, match="0 times"):
        mutate.mutate("a\n", {"file": "f", "find": "zz", "replace": "b"}, "x")
