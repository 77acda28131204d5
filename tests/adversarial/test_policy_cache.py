"""The cache of resolved policies (tmuxjail.policycache) lives in tmuxjail's state dir, which no
jail reaches: from inside a real jail of every mode, an agent can neither read an entry or the
MAC key nor change, replace or add one, and the next start still takes the entry tmuxjail wrote."""

from __future__ import annotations

import pytest
from test_escapes import ALL, Jail

from tmuxjail import policycache

pytestmark = pytest.mark.adversarial


@pytest.mark.parametrize("mode", ALL)
def test_a_jail_cannot_read_or_write_the_policy_cache(world, mode):
    env = world
    cache = policycache.PolicyCache(env.state_dir).dir
    Jail(env, mode, name="first")  # fills the cache for `start shell --mode MODE`
    entries = {p: p.read_bytes() for p in cache.iterdir()}
    inodes = {p: p.stat().st_ino for p in entries}
    assert len([p for p in entries if p.suffix == ".json"]) == 1 and cache / policycache.KEY_FILE in entries
    jail = Jail(env, mode)  # ... and this start takes its policy from there (a miss would rewrite it)
    assert {p: p.stat().st_ino for p in cache.iterdir()} == inodes
    out = jail.sh(f"""
        ls {cache} >/dev/null 2>&1 && echo SEE_CACHE
        cat {cache}/*.json 2>/dev/null | grep -q policy && echo READ_ENTRY
        test -s {cache}/{policycache.KEY_FILE} && echo READ_KEY
        # Writes may land in a tmpfs or the private home; what matters is the host copy below.
        for f in {cache}/*.json {cache}/{policycache.KEY_FILE}; do printf x > "$f"; done 2>/dev/null
        mkdir -p {cache} 2>/dev/null; printf x > {cache}/planted.json 2>/dev/null
        echo end
    """)
    assert out.split() == ["end"], out
    assert {p: p.read_bytes() for p in cache.iterdir()} == entries
    Jail(env, mode, name="after")  # still a hit on what tmuxjail wrote
    assert {p: p.stat().st_ino for p in cache.iterdir()} == inodes
    assert env.sentinel.read_text() == "untouched"
