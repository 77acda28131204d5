"""The import graph of the tmuxjail package, read from the source with ast (nothing is imported):
edges between its modules, the imports made inside functions, and the names a module takes from
another that are private there (`_name`). tests/unit/test_imports.py holds it to the house rules
of docs/architecture.md; `python tests/unit/importgraph.py ROOT` prints it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE_DIRS = (("tmuxjail", "tmuxjail"), ("adapters", "tmuxjail.adapters"))


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for sub, pkg in PACKAGE_DIRS:
        for f in sorted((root / sub).rglob("*.py")):
            parts = [p for p in f.relative_to(root / sub).with_suffix("").parts if p != "__init__"]
            out[".".join([pkg, *parts])] = f
    return out


def _absolute(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = mod.split(".")
    if not is_pkg:
        parts = parts[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


class Graph:
    def __init__(self, root: Path):
        self.modules = modules(root)
        self.edges: dict[str, set[str]] = {m: set() for m in self.modules}
        self.local: list[tuple[str, str, int]] = []  # (module, imported, line) inside a function
        self.private: list[tuple[str, str]] = []  # (module, other.module._name)
        for m, f in self.modules.items():
            self._read(m, f)

    def _target(self, name: str) -> str | None:
        while name and name not in self.modules:
            name = name.rpartition(".")[0]
        return name or None

    def _read(self, m: str, f: Path) -> None:
        tree = ast.parse(f.read_text(), str(f))
        is_pkg = f.name == "__init__.py"
        aliases: dict[str, str] = {}  # local name -> a tmuxjail module

        def visit(node: ast.AST, in_function: bool) -> None:
            for ch in ast.iter_child_nodes(node):
                if isinstance(ch, ast.ImportFrom):
                    base = _absolute(m, is_pkg, ch.level, ch.module)
                    for a in ch.names:
                        full = f"{base}.{a.name}"
                        tgt = self._target(full) if base.startswith("tmuxjail") else None
                        if tgt is None:
                            continue
                        if full in self.modules:
                            aliases[a.asname or a.name] = full
                        elif a.name.startswith("_") and not a.name.startswith("__"):
                            self.private.append((m, full))
                        self._edge(m, tgt, in_function, ch.lineno)
                elif isinstance(ch, ast.Import):
                    for a in ch.names:
                        tgt = self._target(a.name) if a.name.startswith("tmuxjail") else None
                        if tgt is not None:
                            self._edge(m, tgt, in_function, ch.lineno)
                visit(ch, in_function or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(tree, False)
        for node in ast.walk(tree):
            # module._name, and hasattr(module, "_name") / getattr(module, "_name")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") and not node.attr.startswith("__"):
                self.private.append((m, f"{aliases[node.value.id]}.{node.attr}"))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("hasattr", "getattr") \
                    and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in aliases \
                    and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_"):
                self.private.append((m, f"{aliases[node.args[0].id]}.{node.args[1].value}"))

    def _edge(self, m: str, tgt: str, in_function: bool, line: int) -> None:
        if tgt != m and not m.startswith(tgt + "."):  # a package's own __init__ is no edge
            self.edges[m].add(tgt)
            if in_function:
                self.local.append((m, tgt, line))

    def cycles(self) -> list[list[str]]:
        """Strongly connected components of more than one module (Tarjan)."""
        return strongly_connected(self.edges)


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The components of more than one node of a directed graph (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def package_of(graph: Graph, module: str) -> str | None:
    """The package a module is in (itself, for a package), or None for the flat modules of
    tmuxjail/ itself and for tmuxjail."""
    name = module if any(m.startswith(module + ".") for m in graph.modules) else module.rpartition(".")[0]
    return None if name in ("tmuxjail", "") else name


def folder_cycles(graph: Graph) -> list[list[str]]:
    """Cycles between packages: the module edges, each end replaced by its package."""
    folders: dict[str, set[str]] = {}
    for m, targets in graph.edges.items():
        a = package_of(graph, m)
        for t in targets:
            b = package_of(graph, t)
            if a and b and a != b and not b.startswith(a + ".") and not a.startswith(b + "."):
                folders.setdefault(a, set()).add(b)
                folders.setdefault(b, set())
    return strongly_connected(folders)


def largest_functions(root: Path, n: int = 5) -> list[tuple[int, str]]:
    sizes = []
    for f in modules(root).values():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sizes.append((node.end_lineno - node.lineno + 1, f"{f.relative_to(root)}:{node.name}"))
    return sorted(sizes, reverse=True)[:n]


def local_imports(root: Path) -> int:
    """Every import statement inside a function (stdlib and third-party included)."""
    n = 0
    for f in modules(root).values():
        for fn in ast.walk(ast.parse(f.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n += sum(isinstance(s, (ast.Import, ast.ImportFrom)) for s in ast.walk(fn))
    return n


def report(root: Path) -> str:
    g = Graph(root)
    short = lambda m: m.removeprefix("tmuxjail.")  # noqa: E731
    lines = [f"modules: {len(g.modules)}; import edges between them: {sum(map(len, g.edges.values()))}",
             f"import cycles: {len(g.cycles())}"]
    lines += ["  " + " <-> ".join(map(short, c)) for c in g.cycles()]
    lines.append(f"import cycles between packages: {len(folder_cycles(g))}")
    lines += ["  " + " <-> ".join(map(short, c)) for c in folder_cycles(g)]
    lines.append(f"imports of another module's _private names: {len(g.private)}")
    lines += [f"  {short(m)} -> {short(p)}" for m, p in sorted(set(g.private))]
    lines.append(f"function-local imports: {local_imports(root)} (of tmuxjail modules: {len(g.local)})")
    lines.append("five largest functions (lines):")
    lines += [f"  {n:4}  {name}" for n, name in largest_functions(root)]
    lines.append("edges:")
    lines += [f"  {short(m)} -> {', '.join(sorted(map(short, g.edges[m])))}" for m in sorted(g.edges) if g.edges[m]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
