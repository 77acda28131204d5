"""The house rules of the import graph (docs/architecture.md), checked on the source: imports point
one way (cli -> commands -> jail -> {plan, status} -> core, io, sandbox, adapters), there is no
cycle, no module takes another's `_private` name, and imports inside functions are the few seams
named below, each for start-up time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from importgraph import Graph

ROOT = Path(__file__).resolve().parents[2]

# The layers, top down. A module may import its own layer or any below it, never one above.
LAYERS = {
    "tmuxjail.__main__": 5,
    "tmuxjail.cli": 4, "tmuxjail.cli.app": 4, "tmuxjail.api": 4,  # api: an entry point, as the CLI
    "tmuxjail.commands": 3, "tmuxjail.menu": 3, "tmuxjail.discover.cli": 3, "tmuxjail.discover.run": 3,
    "tmuxjail.jail": 2,
    "tmuxjail.plan": 1, "tmuxjail.status": 1, "tmuxjail.warm": 1,
}


def layer(module: str) -> int:
    if module.startswith("tmuxjail.commands."):
        return LAYERS["tmuxjail.commands"]
    return LAYERS.get(module, 0)  # core, io, sandbox, adapters, render, registry


# Imports inside functions: (module, imported) -> why it is not at the top.
SEAMS = {
    ("tmuxjail.cli", "tmuxjail.cli.app"): "--version answers before argparse and the command table load",
    ("tmuxjail.cli", "tmuxjail"): "__version__, on the --version fast path",
    ("tmuxjail.cli.app", "tmuxjail.store"): "an sqlite3 error: sqlite3 is loaded already",
    ("tmuxjail.jail", "tmuxjail.status"): "describing the started session: after the pane is up, not before",
    ("tmuxjail.cli.app", "tmuxjail.host"): "a start as root: the /etc walk begins in a child before start's code loads",
    ("tmuxjail.commands.list", "tmuxjail.plan"): "list --check: the policy code (pydantic), list alone never",
    ("tmuxjail.commands.start", "tmuxjail.plan"): "the dry run and preflight resolve in full; a start goes through warm",
    ("tmuxjail.commands.start", "tmuxjail.sandbox.seatbelt"): "--backend seatbelt, a dry run only (never on Linux's start)",
    ("tmuxjail.commands.start", "tmuxjail.commands.approve"): "asking a human to approve (the profiles, pydantic)",
    ("tmuxjail.warm", "tmuxjail.plan"): "a warm start's miss: the full resolution (pydantic, the profiles)",
    ("tmuxjail.warm", "tmuxjail.profiles"): "a warm start's miss: what the entry records of the profile",
    ("tmuxjail.identity", "tmuxjail.model"): "ExecutableIdentity (pydantic): a warm start only locates",
    ("tmuxjail.context", "tmuxjail.store"): "the store (sqlite3) once a command asks for it",
    ("tmuxjail.menu", "tmuxjail.commands.start"): "a start-menu item: the policy code",
    ("tmuxjail.menu", "tmuxjail.request"): "a start-menu item: the start request",
    ("tmuxjail.menu", "tmuxjail.commands.shell"): "the shell key: the policy code",
    ("tmuxjail.menu", "tmuxjail.commands.resume"): "a resume-menu item: the policy code",
    ("tmuxjail.menu", "tmuxjail.commands.stop"): "the stop prompt's answer",
    ("tmuxjail.menu", "tmuxjail.profiles"): "the start menu only (pydantic)",
    ("tmuxjail.menu", "tmuxjail.config"): "the start menu only",
    # The launcher runs on every start, stdlib only: it imports what a check needs when it runs.
    ("tmuxjail.launch", "tmuxjail.sandbox"): "the launcher",
    ("tmuxjail.launch", "tmuxjail.sandbox.bwrap"): "the launcher",
    ("tmuxjail.launch", "tmuxjail.sandbox.landlock"): "the launcher",
    ("tmuxjail.launch", "tmuxjail.sandbox.pids"): "the launcher",
    ("tmuxjail.launch", "tmuxjail.sandbox.seccomp"): "the launcher",
    ("tmuxjail.launch", "tmuxjail.discover.trace"): "the launcher, on a discovery run only",
    ("tmuxjail.launch", "tmuxjail.netproxy"): "the launcher, with --network proxy only",
    ("tmuxjail.launch", "tmuxjail.netbridge"): "the launcher, with --network proxy only",
    ("tmuxjail.launch", "tmuxjail.canon"): "the launcher, after it has forked its helper (which loads SQLite meanwhile)",
    ("tmuxjail.launch", "tmuxjail.render"): "the launcher, when it refuses",
    ("tmuxjail.launch", "tmuxjail.netlisten"): "the launcher's helper child, with --network proxy only",
    ("tmuxjail.launch", "tmuxjail.sandbox.libc"): "the launcher (keyring)",
    ("tmuxjail.sandbox.bwrap", "tmuxjail.model"): "a policy recorded before limits existed (the launcher imports bwrap)",
}


@pytest.fixture(scope="module")
def graph():
    if not (ROOT / "tmuxjail" / "cli").is_dir():
        pytest.skip("not run from a source tree")
    return Graph(ROOT)


def test_no_import_cycle(graph):
    assert graph.cycles() == []


def test_no_module_takes_another_modules_private_name(graph):
    assert sorted(set(graph.private)) == []


def test_imports_point_down(graph):
    up = [(m, t) for m, targets in graph.edges.items() for t in targets if layer(t) > layer(m)]
    assert up == []


def test_imports_inside_functions_are_the_named_seams(graph):
    found = {(m, t) for m, t, _ in graph.local}
    assert sorted(found - set(SEAMS)) == []


def test_the_checker_sees_what_it_forbids(tmp_path):
    """A cycle, an upward import, a private name and a local import, planted: all four are seen."""
    pkg = tmp_path / "tmuxjail"
    (pkg / "commands").mkdir(parents=True)
    (tmp_path / "adapters").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "commands" / "__init__.py").write_text("")
    (pkg / "plan.py").write_text("from .commands import start\n")
    (pkg / "commands" / "start.py").write_text(
        "from .. import plan\nfrom ..plan import _secret\n\ndef f():\n    from .. import jail\n    return plan._x\n")
    (pkg / "jail.py").write_text("")
    g = Graph(tmp_path)
    assert g.cycles() == [["tmuxjail.commands.start", "tmuxjail.plan"]]
    assert ("tmuxjail.plan", "tmuxjail.commands.start") in {(m, t) for m, ts in g.edges.items() for t in ts
                                                            if layer(t) > layer(m)}
    assert sorted(set(g.private)) == [("tmuxjail.commands.start", "tmuxjail.plan._secret"),
                                      ("tmuxjail.commands.start", "tmuxjail.plan._x")]
    assert [(m, t) for m, t, _ in g.local] == [("tmuxjail.commands.start", "tmuxjail.jail")]
