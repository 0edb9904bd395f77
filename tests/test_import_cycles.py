"""No import cycles among rlsim's modules, function-level imports included (issue 24).

A cycle hidden inside a function still ties two modules together: neither can be read, moved or tested without
the other, and the order in which they first load decides whether the program starts. So the graph here has an
edge for every ``import`` of an rlsim module anywhere in a file, except under ``if TYPE_CHECKING:`` (which never
runs). Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, so those are edges too, unless the
importer lives inside that package. A registry's built-in modules are loaded by name (``Registry(builtins=...)``,
like a user's plug-ins), which is not an import of the declaring module's own package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join(package + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere (and their parent packages)."""
    files = {module_name(root, p): p for p in (root / package).rglob("*.py")}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(module, is_package, node, known):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    ancestor = ".".join(parts[:i])
                    inside = module == ancestor or module.startswith(ancestor + ".")
                    if ancestor in known and (ancestor == target or not inside) and ancestor != module:
                        edges.add(ancestor)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _edges_within(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    return [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component]


def test_rlsim_has_no_import_cycles():
    graph = import_graph(ROOT, "rlsim")
    assert len(graph) > 150  # the walk found the package
    found = cycles(graph)
    assert not found, "import cycles (function-level imports count):\n" + "\n".join(
        "; ".join(_edges_within(graph, c)) for c in found
    )


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import g\n\ndef f():\n    return g()\n",
            "pkg/b.py": "def g():\n    from pkg import a  # hidden in a function\n    return a\n",
            "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.d import X\n",
            "pkg/d.py": "from pkg.c import TYPE_CHECKING\n",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b"]]  # c <-> d only under TYPE_CHECKING


def test_a_module_importing_its_own_package_from_inside_is_a_cycle(tmp_path):
    # The registry-fill pattern this test made rlsim drop: base.py imported the package that imports base.py.
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub.base import lookup\n",
            "pkg/sub/__init__.py": "from pkg.sub.base import lookup\nfrom pkg.sub import impl\n",
            "pkg/sub/base.py": "def lookup():\n    import pkg.sub\n    return pkg.sub\n",
            "pkg/sub/impl.py": "from .base import lookup\n",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.sub", "pkg.sub.base", "pkg.sub.impl"]]
