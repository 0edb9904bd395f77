"""No import cycles among rlsim's modules, function-level imports included (issue 24).

A cycle hidden inside a function still ties two modules together: neither can be read, moved or tested without
the other, and the order in which they first load decides whether the program starts. So the graph here has an
edge for every ``import`` of an rlsim module anywhere in a file, except under ``if TYPE_CHECKING:`` (which never
runs). Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, so those are edges too, unless the
importer lives inside that package. A registry's built-in modules are loaded by name (``Registry(builtins=...)``,
like a user's plug-ins), which is not an import of the declaring module's own package.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers.import_graph import read, write_package

ROOT = Path(__file__).resolve().parents[1]


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere (and their parent packages)."""
    return read(root, package).graph(deferred=True)


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


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    write_package(
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
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub.base import lookup\n",
            "pkg/sub/__init__.py": "from pkg.sub.base import lookup\nfrom pkg.sub import impl\n",
            "pkg/sub/base.py": "def lookup():\n    import pkg.sub\n    return pkg.sub\n",
            "pkg/sub/impl.py": "from .base import lookup\n",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.sub", "pkg.sub.base", "pkg.sub.impl"]]
