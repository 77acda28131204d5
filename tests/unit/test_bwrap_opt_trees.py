"""bwrap.opt_trees: what a strict jail gets of /opt, from the policy alone (issue 30.7)."""

from __future__ import annotations

import pytest

from tmuxjail.sandbox.bwrap import opt_trees


def pol(exe: str, roots: tuple[str, ...], extra: tuple[str, ...] = ()) -> dict:
    return {"mode": "isolated", "install_roots": list(roots),
            "executable": {"path": exe, "sha256": "sha256:" + "a" * 64, "extra": [[p, "sha256:b"] for p in extra]}}


@pytest.mark.parametrize("policy,want", [
    (pol("/usr/bin/codex", ("/usr/lib/node_modules",)), ()),
    (pol("/opt/codex/bin/codex", ("/opt/codex",)), ("/opt/codex",)),
    # a script's interpreter in another tree, and a root that is a tree's own directory
    (pol("/opt/claude/cli.js", ("/opt/claude/lib/node_modules", "/opt/node/bin/node"), ("/opt/node/bin/node",)),
     ("/opt/claude", "/opt/node")),
    (pol("/home/u/.local/bin/x", ("/home/u/.local/lib/x",), ("/opt/py/bin/python3",)), ("/opt/py",)),
    (pol("/optional/x", ("/optional",)), ()),  # a sibling named alike is not /opt
    (pol("/opt/bin/x", ("/opt",)), ("/opt",)),  # an install root that is /opt itself: all of it
])
def test_the_jail_gets_the_top_level_opt_trees_of_its_cli(policy, want):
    assert opt_trees(policy) == want


def test_no_policy_fields_means_no_tree():
    assert opt_trees({"mode": "isolated"}) == ()
