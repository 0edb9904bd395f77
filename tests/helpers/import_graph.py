"""rlsim's imports read from its source: who imports what, where, and whether it runs when the module loads.

One reading serves three checks: no cycles (``tests/test_import_cycles.py``), no function-level import that defers
nothing heavy (``tests/test_deferred_imports.py``), and no package importing what it may not
(``tests/test_import_rules.py``). Imports under ``if TYPE_CHECKING:`` never run: they are kept (``typing_only``)
for the rules that ban a dependency outright, and left out of everything that follows what runs.

An import runs "at load" when it sits at module level, in a class body or in a module-level ``if``/``try``/``with``
block; one inside a function (or a method) runs later or never and is "deferred".
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImportSite:
    """One ``import`` statement. ``internal``: the package's modules it loads (the deepest module each name
    resolves to, parents not added); ``external``: the other dotted names it imports (``torch.nn``)."""

    module: str
    path: Path
    line: int
    deferred: bool
    typing_only: bool
    internal: frozenset[str]
    external: frozenset[str]


def under(module: str, package: str) -> bool:
    """Whether ``module`` is ``package`` or inside it (``torch.nn`` is under ``torch``; ``rlsim.looping`` is not
    under ``rlsim.loop``)."""
    return module == package or module.startswith(package + ".")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """(import statement, deferred, typing_only) for every import at any depth."""
    pending: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]
    while pending:
        node, deferred, typing_only = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend((child, deferred, True) for child in node.body)
            pending.extend((child, deferred, typing_only) for child in node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, deferred, typing_only
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        pending.extend((child, inner, typing_only) for child in ast.iter_child_nodes(node))


def _names(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The dotted names a statement imports; ``from a import b`` gives ``a.b`` where that is a module, else ``a``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.module == "__future__":
        return []
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]


class Imports:
    """Every import statement of the package ``package`` found under ``root``."""

    def __init__(self, root: Path, package: str) -> None:
        self.root, self.package = root, package
        self.files = {module_name(root, p): p for p in sorted((root / package).rglob("*.py"))}
        known = set(self.files)
        self.sites: dict[str, list[ImportSite]] = {}
        for module, path in self.files.items():
            is_package = path.name == "__init__.py"
            sites = []
            for node, deferred, typing_only in _statements(ast.parse(path.read_text(encoding="utf-8"))):
                internal, external = set(), set()
                for name in _names(module, is_package, node, known):
                    if name.split(".")[0] != package:
                        external.add(name)
                        continue
                    while name and name not in known:
                        name = name.rpartition(".")[0]
                    if name and name != module:
                        internal.add(name)
                site = ImportSite(
                    module, path, node.lineno, deferred, typing_only, frozenset(internal), frozenset(external)
                )
                sites.append(site)
            self.sites[module] = sorted(sites, key=lambda s: s.line)

    def running(self, module: str) -> list[ImportSite]:
        """``module``'s imports that can run: all but those under ``if TYPE_CHECKING:``."""
        return [s for s in self.sites[module] if not s.typing_only]

    def at(self, path: Path, line: int) -> str:
        return f"{path.relative_to(self.root)}:{line}"

    def edges(self, module: str, deferred: bool = True) -> set[str]:
        """The package's modules that ``module`` imports (at load only, unless ``deferred``), with the parent
        packages importing them runs (``a/__init__`` for ``a.b``), except packages ``module`` itself lives in."""
        out: set[str] = set()
        for site in self.running(module):
            if site.deferred and not deferred:
                continue
            for target in site.internal:
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    ancestor = ".".join(parts[:i])
                    inside = module == ancestor or module.startswith(ancestor + ".")
                    if ancestor in self.files and (ancestor == target or not inside) and ancestor != module:
                        out.add(ancestor)
        return out

    def graph(self, deferred: bool = True) -> dict[str, set[str]]:
        return {module: self.edges(module, deferred) for module in self.files}

    def external_at_load(self, module: str) -> set[str]:
        """Third-party (and stdlib) names ``module`` imports at load, with their parents (``torch`` for
        ``torch.nn``): importing a submodule runs its package first."""
        return {
            ".".join(name.split(".")[:i])
            for site in self.running(module)
            if not site.deferred
            for name in site.external
            for i in range(1, name.count(".") + 2)
        }

    def load_chains(self, starts: Iterable[str], forbidden: Iterable[str]) -> dict[str, list[str]]:
        """For each forbidden name that importing any of ``starts`` reaches at load, the shortest chain
        ``[start, ..., forbidden]``. A forbidden name bans its submodules too (``torch`` bans ``torch.nn``), and
        the package's own modules (``rlsim.loop``) can be forbidden as well as third-party ones."""
        bad = tuple(forbidden)
        starts = sorted(starts)
        parent: dict[str, str | None] = dict.fromkeys(starts)
        queue = deque(starts)
        found: dict[str, list[str]] = {}
        while queue:
            name = queue.popleft()
            hit = next((b for b in bad if under(name, b)), None)
            if hit is not None:
                found.setdefault(hit, _chain(name, parent))
                continue
            if name not in self.files:
                continue
            # The module's own parent packages run before it does.
            parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)} & set(self.files)
            for target in sorted(self.edges(name, deferred=False) | parents | self.external_at_load(name)):
                if target not in parent:
                    parent[target] = name
                    queue.append(target)
        return found


REPOSITORY = Path(__file__).resolve().parents[2]


def read(root: Path, package: str) -> Imports:
    """``Imports(root, package)``; the repository's own source is read once per test session (it does not change
    during one), a planted package in a temporary folder every time (a test may edit it between checks)."""
    return _read_once(package) if root.resolve() == REPOSITORY else Imports(root, package)


@functools.cache
def _read_once(package: str) -> Imports:
    return Imports(REPOSITORY, package)


def _chain(name: str, parent: dict[str, str | None]) -> list[str]:
    chain = [name]
    while (up := parent[chain[-1]]) is not None:
        chain.append(up)
    return chain[::-1]


def write_package(root: Path, files: dict[str, str]) -> None:
    """Write a small fake package (relative path -> source) for a check to be shown failing on."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
