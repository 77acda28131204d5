"""The house rules of the import graph (docs/architecture.md), checked on the source: every module
sits in a named layer and imports only its own layer or lower ones (entry points -> commands ->
sessions -> jail -> resolution and rows -> core and io -> pane wing -> net -> sandbox builders -> base), core is pure,
the pane wing and net are stdlib only plus a named few of tmuxjail, there is no cycle between
modules or between packages, no module takes another's `_private` name, and imports inside
functions are the few seams named below, each for start-up time."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from importgraph import Graph, folder_cycles

ROOT = Path(__file__).resolve().parents[2]

# The layers, bottom up: (name, the modules in it (a name ending in "." is a package and all it
# holds), why it sits there). A module may import its own layer or any below it, never one above.
LAYER_LIST: list[tuple[str, tuple[str, ...], str]] = [
    ("base", ("tmuxjail", "tmuxjail.errors", "tmuxjail.canon", "tmuxjail.render", "tmuxjail.registry",
              "tmuxjail.subpath", "tmuxjail.hostos", "tmuxjail.record"),
     "stdlib-only leaves every layer prints, fingerprints and names modes through, the launcher included"),
    ("sandbox builders", ("tmuxjail.sandbox.",),
     "pure argv/profile builders (and libc for the launcher): the start and the launcher build the same argv"),
    ("net", ("tmuxjail.net.",),
     "the egress proxy, its relay and its records: run by the launcher's helper, stdlib only"),
    ("pane wing", ("tmuxjail.pane.",),
     "what runs in the pane outside the jail on every start: stdlib only, so below everything that loads more"),
    ("core and io", (
        # core (pure: CORE below)
        "tmuxjail.model", "tmuxjail.policy", "tmuxjail.approvals", "tmuxjail.restrict", "tmuxjail.config",
        "tmuxjail.profiles", "tmuxjail.listing", "tmuxjail.activity", "tmuxjail.scan", "tmuxjail.gitconfig",
        "tmuxjail.request", "tmuxjail.effective", "tmuxjail.mcpconf", "tmuxjail.trust", "tmuxjail.catalogue", "tmuxjail.budget",
        "tmuxjail.completion", "tmuxjail.adapters.", "tmuxjail.discover", "tmuxjail.discover.candidate",
        "tmuxjail.discover.classify", "tmuxjail.discover.evidence", "tmuxjail.discover.trace",
        # io (one owner each: OWNERS below)
        "tmuxjail.tmux", "tmuxjail.store", "tmuxjail.host", "tmuxjail.identity", "tmuxjail.paths", "tmuxjail.log",
        "tmuxjail.context", "tmuxjail.audit", "tmuxjail.stateaudit", "tmuxjail.doctor", "tmuxjail.policycache",
        "tmuxjail.facts", "tmuxjail.enforce", "tmuxjail.ahead", "tmuxjail.gitrun", "tmuxjail.gitglobal", "tmuxjail.worktree",
        "tmuxjail.conversation"),
     "side by side: the policy's pure computation and the one owner of each outside thing it reads"),
    ("resolution and rows", ("tmuxjail.plan", "tmuxjail.status", "tmuxjail.warm"),
     "resolution, the warm start and the list rows: they do not know each other's callers"),
    ("orchestration", ("tmuxjail.jail",),
     "what start, resume, `_pane` and shell share: above plan and status, which it ends with"),
    ("sessions", ("tmuxjail.sessions", "tmuxjail.sessions."),
     "the use cases (start, resume, stop, shell, approve): the CLI, the API and the menus call them"),
    ("commands", ("tmuxjail.commands", "tmuxjail.commands.", "tmuxjail.menu", "tmuxjail.certify",
                  "tmuxjail.certify."),
     "one module per verb (the menus, discovery's and certify's runs are commands too)"),
    ("entry points", ("tmuxjail.__main__", "tmuxjail.cli", "tmuxjail.cli.app", "tmuxjail.api",
                      "tmuxjail.testing", "tmuxjail.testing."),
     "the CLI and the API (and the tests' macOS seam, which runs them): nothing imports them"),
]
CORE = set(LAYER_LIST[4][1][:LAYER_LIST[4][1].index("tmuxjail.tmux")]) | set(LAYER_LIST[0][1])
# An import up the layers, allowed because it is inside a function and why.
UPWARD = {
    ("tmuxjail.sandbox.bwrap", "tmuxjail.effective"): "a policy recorded before limits existed: the builders "
                                                  "otherwise take the policy's JSON form",
}
# The pane wing and net run outside the jail on every start (or as its proxy): the standard library
# and these of tmuxjail only, besides each other (the launcher imports net, net nothing of the pane).
WING = ("tmuxjail.pane.", "tmuxjail.net.")
WING_MAY_IMPORT = {
    "tmuxjail.errors": "the exit codes, the in-jail marker and the error types (stdlib only)",
    "tmuxjail.canon": "the fingerprint and canonical JSON the start computed, recomputed alike (stdlib only)",
    "tmuxjail.render": "a refusal as one line, as every command prints it (stdlib only)",
    "tmuxjail.subpath": "is a path inside a root: the one containment predicate (imports nothing)",
    "tmuxjail.sandbox": "the host layout: the launcher rebuilds bwrap's argv with the start's builders",
    "tmuxjail.sandbox.bwrap": "the same argv builder as the start's",
    "tmuxjail.sandbox.seccomp": "the seccomp program the launcher hands bwrap",
    "tmuxjail.sandbox.landlock": "the launcher scopes itself with Landlock",
    "tmuxjail.sandbox.pids": "a root-run jail's pids cgroup",
    "tmuxjail.sandbox.libc": "unshare, mount and keyctl through _ctypes",
    "tmuxjail.sandbox.seatbelt": "macOS: the launcher builds the Seatbelt profile with the start's builder",
    "tmuxjail.sandbox.mcpjail": "the MCP broker runs each server in a jail of its own (pane/mcp.py)",
    "tmuxjail.hostos": "which start path runs (Linux or macOS) and the sandbox-exec it runs (stdlib only)",
}
# Core is pure: it reaches no process, database, socket or tmux server (io does, one owner each).
NOT_IN_CORE = ("subprocess", "sqlite3", "_sqlite3", "socket", "_socket", "libtmux")
# libtmux: tmux.py is the only tmux layer (api names its types, for annotations only).
OWNERS = {"libtmux": {"tmuxjail.tmux", "tmuxjail.api"}}


def layer_of(module: str) -> int | None:
    for n, (_, members, _) in enumerate(LAYER_LIST):
        if module in members or any(m.endswith(".") and (module + ".").startswith(m) for m in members):
            return n
    return None


def layer(module: str) -> int:
    n = layer_of(module)
    assert n is not None, f"{module} is in no layer: add it to LAYER_LIST in tests/unit/test_imports.py"
    return n


def in_wing(module: str) -> bool:
    return module.startswith(WING)


def external_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import in a file, in functions too."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out - {"tmuxjail"}


# Imports inside functions: (module, imported) -> why it is not at the top.
SEAMS = {
    ("tmuxjail.commands.start", "tmuxjail.worktree"): "--worktree only: a plain start never loads git's code",
    ("tmuxjail.commands.start", "tmuxjail.config"): "--worktree only: its root and branch prefix",
    ("tmuxjail.status", "tmuxjail.worktree"): "a worktree session's row only: list loads no git code otherwise",
    ("tmuxjail.menu", "tmuxjail.worktree"): "the start menu's worktree item only",
    ("tmuxjail.cli", "tmuxjail.cli.app"): "--version answers before argparse and the command table load",
    ("tmuxjail.cli", "tmuxjail"): "__version__, on the --version fast path",
    ("tmuxjail.cli.app", "tmuxjail.store"): "an sqlite3 error: sqlite3 is loaded already",
    ("tmuxjail.jail", "tmuxjail.status"): "describing the started session: after the pane is up, not before",
    ("tmuxjail.cli.app", "tmuxjail.host"): "a start as root: the /etc walk begins in a child before start's code loads",
    ("tmuxjail.commands.list", "tmuxjail.plan"): "list --check: the policy code (pydantic), list alone never",
    ("tmuxjail.sessions.start", "tmuxjail.plan"): "the dry run and preflight resolve in full; a start goes through warm",
    ("tmuxjail.sessions.start", "tmuxjail.sandbox.seatbelt"): "--backend seatbelt, a dry run only (never on Linux's start)",
    ("tmuxjail.enforce", "tmuxjail.sandbox.seatbelt"): "the macOS backend, on macOS only",
    ("tmuxjail.net.listen", "tmuxjail.sandbox.libc"): "the proxy's helper joins the jail's namespaces (setns) once bwrap runs",
    ("tmuxjail.testing.darwin", "tmuxjail.cli"): "the seam runs the normal CLI once it has set the platform",
    ("tmuxjail.testing.darwin", "tmuxjail.pane.launch"): "the seam runs the normal launcher once it has set the platform",
    ("tmuxjail.commands.start", "tmuxjail.audit"): "the workspace's walk for the audit starts in a child once the early pane is out",
    ("tmuxjail.commands.start", "tmuxjail.sessions.approve"): "asking a human to approve (the profiles, pydantic)",
    ("tmuxjail.commands.start", "tmuxjail.sessions.start"): "the policy code loads after the early pane is spawned",
    ("tmuxjail.warm", "tmuxjail.plan"): "a warm start's miss: the full resolution (pydantic, the profiles)",
    ("tmuxjail.warm", "tmuxjail.profiles"): "a warm start's miss: what the entry records of the profile",
    ("tmuxjail.context", "tmuxjail.store"): "the store (sqlite3) once a command asks for it",
    ("tmuxjail.menu", "tmuxjail.sessions.start"): "a start-menu item: the policy code",
    ("tmuxjail.menu", "tmuxjail.request"): "a start-menu item: the start request",
    ("tmuxjail.menu", "tmuxjail.sessions.shell"): "the shell key: the policy code",
    ("tmuxjail.menu", "tmuxjail.sessions.resume"): "a resume-menu item: the policy code",
    ("tmuxjail.menu", "tmuxjail.sessions.stop"): "the stop prompt's answer",
    ("tmuxjail.menu", "tmuxjail.profiles"): "the start menu only (pydantic)",
    ("tmuxjail.menu", "tmuxjail.config"): "the start menu only",
    ("tmuxjail.sandbox.bwrap", "tmuxjail.effective"): "a policy recorded before limits existed (the launcher imports bwrap)",
    ("tmuxjail.sessions.approve", "tmuxjail.plan"): "approve --mcp: each server hashed as a start hashes it",
}


@pytest.fixture(scope="module")
def graph():
    if not (ROOT / "tmuxjail" / "cli").is_dir():
        pytest.skip("not run from a source tree")
    return Graph(ROOT)


def test_every_module_is_in_a_layer(graph):
    assert sorted(m for m in graph.modules if layer_of(m) is None) == []


def test_no_import_cycle(graph):
    assert graph.cycles() == []


def test_no_cycle_between_packages(graph):
    """Between tmuxjail's packages (the flat modules of tmuxjail/ itself left out)."""
    assert folder_cycles(graph) == []


def test_no_module_takes_another_modules_private_name(graph):
    assert sorted(set(graph.private)) == []


def test_imports_point_down(graph):
    up = [(m, t) for m, targets in graph.edges.items() for t in targets
          if layer(t) > layer(m) and (m, t) not in UPWARD]
    assert up == []
    assert {(m, t) for m, t, _ in graph.local} >= set(UPWARD)  # each one a seam inside a function


def test_the_pane_wing_and_net_import_the_stdlib_and_a_named_few(graph):
    bad = [(m, t) for m, targets in graph.edges.items() if in_wing(m)
           for t in targets if not in_wing(t) and t not in WING_MAY_IMPORT]
    assert bad == []
    outside = [(m, n) for m, f in graph.modules.items() if in_wing(m)
               for n in sorted(external_imports(f)) if n not in sys.stdlib_module_names]
    assert outside == []


def test_core_is_pure_and_io_has_one_owner_each(graph):
    impure = [(m, n) for m, f in graph.modules.items() if m in CORE
              for n in sorted(external_imports(f) & set(NOT_IN_CORE))]
    assert impure == []
    owned = [(m, n) for m, f in graph.modules.items() for n, owners in OWNERS.items()
             if n in external_imports(f) and m not in owners]
    assert owned == []


def test_imports_inside_functions_are_the_named_seams(graph):
    """The launcher runs on every start: its modules import what a check needs when it runs, and
    only what the wing may import at all (test_the_pane_wing_and_net_import_...)."""
    found = {(m, t) for m, t, _ in graph.local}
    launcher = {(m, t) for m, t in found if m.startswith("tmuxjail.pane.")}
    assert sorted(found - launcher - set(SEAMS) - set(UPWARD)) == []


def test_the_checker_sees_what_it_forbids(tmp_path):
    """A cycle, an upward import, a private name, a local import, a module in no layer, a wing
    module importing the policy code or a third-party package, and core reaching a process, all
    planted: each is seen."""
    pkg = tmp_path / "tmuxjail"
    for d in ("commands", "pane", "cli"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "commands" / "__init__.py").write_text("from ..pane import launch\n")
    (tmp_path / "adapters").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plan.py").write_text("from .commands import start\n")
    (pkg / "commands" / "start.py").write_text(
        "from .. import plan\nfrom ..plan import _secret\n\ndef f():\n    from .. import jail\n    return plan._x\n")
    (pkg / "jail.py").write_text("")
    (pkg / "gadget.py").write_text("")
    (pkg / "model.py").write_text("def f():\n    import subprocess\n")
    (pkg / "pane" / "launch.py").write_text("import json\nimport yaml\n\ndef f():\n    from .. import plan\n")
    (pkg / "pane" / "command.py").write_text("from ..commands import start\n")
    (pkg / "cli" / "app.py").write_text("from ..pane import command\n")
    g = Graph(tmp_path)
    assert g.cycles() == [["tmuxjail.commands.start", "tmuxjail.plan"]]
    assert folder_cycles(g) == [["tmuxjail.commands", "tmuxjail.pane"]]
    assert ("tmuxjail.plan", "tmuxjail.commands.start") in {(m, t) for m, ts in g.edges.items() for t in ts
                                                            if layer(t) > layer(m)}
    assert sorted(set(g.private)) == [("tmuxjail.commands.start", "tmuxjail.plan._secret"),
                                      ("tmuxjail.commands.start", "tmuxjail.plan._x")]
    assert sorted((m, t) for m, t, _ in g.local) == [("tmuxjail.commands.start", "tmuxjail.jail"),
                                                     ("tmuxjail.pane.launch", "tmuxjail.plan")]
    assert [m for m in g.modules if layer_of(m) is None] == ["tmuxjail.gadget"]
    assert sorted((m, t) for m, ts in g.edges.items() if in_wing(m) for t in ts
                  if not in_wing(t) and t not in WING_MAY_IMPORT) == [
        ("tmuxjail.pane.command", "tmuxjail.commands.start"), ("tmuxjail.pane.launch", "tmuxjail.plan")]
    assert external_imports(g.modules["tmuxjail.pane.launch"]) - sys.stdlib_module_names == {"yaml"}
    assert external_imports(g.modules["tmuxjail.model"]) & set(NOT_IN_CORE) == {"subprocess"}
