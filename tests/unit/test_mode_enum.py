"""Mode travels as the enum (registry.Mode) through adapters and builders; JSON, the canonical form
and therefore fingerprints see the same strings as before, and mode names are written as literals
only where the enum cannot be loaded or where they are config keys."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from tmuxjail import canon, policy
from tmuxjail.adapters import get as adapter
from tmuxjail.registry import MODES, Mode

sys.path.insert(0, str(Path(__file__).parent))
from test_policy import HOME, resolve

ROOT = Path(__file__).resolve().parents[2]


def test_mode_is_a_str_enum_whose_json_is_its_name():
    assert issubclass(Mode, str)
    for m in Mode:
        assert m == m.value and f"{m}" == str(m) == m.value
        assert json.dumps({m: [m]}) == json.dumps({m.value: [m.value]})
        assert canon.canonical_json({m: m}) == canon.canonical_json({m.value: m.value})


# Computed from the code before Mode travelled as the enum (commit c83d7f5): a policy's fingerprint
# must not move when its mode is an enum member rather than a string.
PINNED = {
    "compatibility": "sha256:8cd8bd6e90c9cc9060ab4cf492c9321e68c95bfc2274c76eaa09d9a1e8b67aaf",
    "isolated": "sha256:18aa9f44bf30cbec1381f257a4d951f78ad86a998d30cace06ca60f178867643",
    "verified": "sha256:ee018f2b5c266421b0fc56cc262ae165e12bac9e3fd556034c885be5368598cd",
}


@pytest.mark.parametrize("mode", MODES)
def test_a_policys_fingerprint_is_unchanged(mode):
    data = resolve(mode=mode)
    assert type(data["mode"]) is str and data["mode"] == mode
    assert policy.fingerprint(data) == PINNED[mode]


@pytest.mark.parametrize("provider", ["claude-code", "codex"])
def test_adapters_answer_the_enum_as_they_answered_its_name(provider):
    a = adapter(provider)
    for m in Mode:
        assert a.env(HOME, m, 0) == a.env(HOME, m.value, 0)  # type: ignore[arg-type]
        assert a.certify_tokens(m) == a.certify_tokens(m.value)  # type: ignore[arg-type]
        assert a.own_sandbox_off(["x"], m, "bwrap") == (["x", *a.seatbelt_args] if m.strict else ["x"])


# Where a mode name may still be a literal, and why.
LITERALS_ALLOWED = {
    "tmuxjail/registry.py": "the enum itself",
    # The pane wing reads the mode from the launch spec's JSON and must not import enum (the
    # launcher's start-up budget: tests/integration/test_startup_imports.py).
    "tmuxjail/pane/launch.py": "the launcher",
    "tmuxjail/pane/spec.py": "the launch spec",
    "tmuxjail/pane/darwin.py": "the launcher's macOS path",
    "tmuxjail/pane/command.py": "the pane's command line and hooks, stdlib only (built before the policy code loads)",
    "tmuxjail/sandbox/bwrap.py": "rebuilt by the launcher",
    # net/ reads the mode from session JSON and the store's rows, and is stdlib only like the pane.
    "tmuxjail/net/log.py": "session JSON",
    "tmuxjail/net/policy.py": "a stored session's mode (config.restore_network)",
    "tmuxjail/config.py": "the config file's [network] keys",
}


def mode_literals(source: str) -> list[int]:
    """Lines of string constants equal to a mode name, docstrings left out."""
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in MODES and id(n) not in docs]


def test_the_finder_sees_a_literal_and_not_a_docstring():
    assert mode_literals('"""isolated"""\ndef f(m):\n    """verified"""\n    return m == "isolated"\n') == [4]


def test_mode_names_are_the_enum_outside_the_named_places():
    if not (ROOT / "tmuxjail" / "registry.py").is_file():
        pytest.skip("not run from a source tree")
    files = [*sorted((ROOT / "tmuxjail").rglob("*.py")), *sorted((ROOT / "adapters").rglob("*.py"))]
    found = [f"{p.relative_to(ROOT)}:{line}" for p in files if str(p.relative_to(ROOT)) not in LITERALS_ALLOWED
             for line in mode_literals(p.read_text())]
    assert found == [], "compare with registry.Mode (a str enum), converting where the mode comes from JSON"
