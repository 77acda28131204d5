"""Issue 30's house rules that read the source as a whole (the import graph's are in
test_imports.py): short functions, and no process-wide tricks to make a library fit (no
`sys.modules` assignment, no replacement of `os.environ`): a thread or an orchestrator calling
tmuxjail.api must never see another environment or another module than the one it loaded."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "tmuxjail").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")])
LONGEST = 100


def _trees():
    for path in SOURCES:
        yield path.relative_to(ROOT), ast.parse(path.read_text(), str(path))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else "?"


def test_no_function_is_longer_than_a_hundred_lines():
    long = [f"{p}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for p, tree in _trees() for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > LONGEST]
    assert not long, long


def offences(tree: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(tree):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            where = t.value if isinstance(t, ast.Subscript) else t
            if _dotted(where) in ("sys.modules", "os.environ"):
                out.append(f"line {n.lineno}: assignment to {_dotted(where)}")
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            owner = _dotted(n.func.value)
            if owner == "sys.modules" and n.func.attr in ("__setitem__", "update", "setdefault", "pop", "clear"):
                out.append(f"line {n.lineno}: sys.modules.{n.func.attr}()")
            if owner == "os.environ" and n.func.attr in ("clear", "update", "__setitem__", "pop", "popitem", "setdefault"):
                out.append(f"line {n.lineno}: os.environ.{n.func.attr}()")
        if isinstance(n, ast.Delete):
            out += [f"line {n.lineno}: del {_dotted(t.value)}[...]" for t in n.targets
                    if isinstance(t, ast.Subscript) and _dotted(t.value) in ("sys.modules", "os.environ")]
    return out


def test_no_module_swaps_sys_modules_or_the_process_environment():
    found = [f"{p} {o}" for p, tree in _trees() for o in offences(tree)]
    assert not found, found


def test_the_check_sees_each_kind_of_swap():
    for src in ("import os\nos.environ.clear()", "import os\nos.environ.update({})", "import os\nos.environ = {}",
                "import os\nos.environ['A'] = 'b'", "import sys\nsys.modules['x'] = None",
                "import sys\ndel sys.modules['x']"):
        assert offences(ast.parse(src)), src
    assert not offences(ast.parse("import os\nos.environ.get('A')\nenv = dict(os.environ)"))
