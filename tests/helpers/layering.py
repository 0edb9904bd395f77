"""Which modules a package pulls in at import time: module-level imports, followed transitively.

An import inside a function (or under ``if TYPE_CHECKING:``) runs later or never, so it is not
followed: that is how the planner's real-work parts reach torch or ``rlsim.loop`` on purpose.
Imports inside the package's own top-level package (``rlsim`` for ``rlsim/planner``) are followed
through their source files; others are leaves.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path


def forbidden_imports(package_dir: Path, forbidden: Sequence[str]) -> list[str]:
    """One ``"a -> b -> torch"`` chain per forbidden module that importing any module of
    ``package_dir`` reaches at module level. ``forbidden``: module names; each bans its submodules too."""
    graph = _ImportGraph(package_dir)
    start = [graph.module_name(path) for path in sorted(Path(package_dir).resolve().rglob("*.py"))]
    parent: dict[str, str | None] = {name: None for name in start}
    queue = deque(start)
    chains = []
    while queue:
        name = queue.popleft()
        if name in forbidden:
            chains.append(" -> ".join(_path_to(name, parent)))
        # Importing ``torch.nn`` imports ``torch`` too (parents are edges), so the chain ends at the banned name.
        if any(name == bad or name.startswith(bad + ".") for bad in forbidden):
            continue
        for target in graph.imports_of(name):
            if target not in parent:
                parent[target] = name
                queue.append(target)
    return sorted(chains)


def _path_to(name: str, parent: dict[str, str | None]) -> list[str]:
    chain = [name]
    while (up := parent[chain[-1]]) is not None:
        chain.append(up)
    return chain[::-1]


class _ImportGraph:
    def __init__(self, package_dir: Path) -> None:
        top = Path(package_dir).resolve()
        if not (top / "__init__.py").is_file():
            raise ValueError(f"{top} is not a package (no __init__.py)")
        while (top.parent / "__init__.py").is_file():
            top = top.parent
        self._root, self._internal = top.parent, top.name

    def module_name(self, path: Path) -> str:
        parts = path.relative_to(self._root).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def source(self, name: str) -> Path | None:
        base = self._root.joinpath(*name.split("."))
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    def imports_of(self, name: str) -> set[str]:
        """Modules that importing ``name`` imports first: its parent packages and its module-level imports."""
        if name.split(".")[0] != self._internal or (path := self.source(name)) is None:
            return set()
        found = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        is_package = path.name == "__init__.py"
        for node in _module_level(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                base = _absolute(name, is_package, node.level, node.module)
                found.add(base)
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
                found.update(f"{base}.{a.name}" for a in node.names if self.source(f"{base}.{a.name}"))
        return {m for target in found for m in _with_parents(target)} - {name}


def _module_level(body: list[ast.stmt] | list[ast.excepthandler]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements run when the module is imported: not in functions, not under TYPE_CHECKING."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _module_level(node.orelse)
        else:  # class bodies, if/try/with blocks run at import time
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    yield from _module_level(inner)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
