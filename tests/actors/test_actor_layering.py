"""``rlsim.actors`` imports nothing from ``rlsim.loop``: the loop drives the actors, not the reverse.

Every import counts, also one inside a function: a lazy import still ties the actors to the loop's
config and would bring back the circle ``loop/config.py`` <-> ``actors/placement.py`` once had.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rlsim.actors

FORBIDDEN = "rlsim.loop"


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module) for every import statement in ``source``, relative ones resolved against ``package``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            # `from rlsim import loop` names the module in the alias, not in `module`.
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


def forbidden_imports(package_dir: Path, package: str, forbidden: str = FORBIDDEN) -> list[str]:
    """``file:line module`` for each import of ``forbidden`` (or a submodule) in the package's files."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        owner = ".".join([package, *parts[:-1]]) if path.name != "__init__.py" else ".".join([package, *parts])
        for line, module in imported_modules(path.read_text(), owner):
            if module == forbidden or module.startswith(forbidden + "."):
                found.append(f"{path.relative_to(package_dir.parent)}:{line} {module}")
    return found


def test_the_actors_import_nothing_from_the_loop() -> None:
    package_dir = Path(rlsim.actors.__file__).parent
    assert len(list(package_dir.glob("*.py"))) >= 4  # the check really walked the package
    assert forbidden_imports(package_dir, "rlsim.actors") == []


def test_the_check_catches_a_planted_import(tmp_path: Path) -> None:
    pkg = tmp_path / "actors"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""clean"""\nimport os\n')
    (pkg / "clean.py").write_text("from rlsim.placement import ResolvedPlacement\nimport rlsim.looping\n")
    (pkg / "lazy.py").write_text("def f():\n    from rlsim.loop.config import RunConfig\n    return RunConfig\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "rel.py").write_text("from ...loop import deadline\n")
    (pkg / "whole.py").write_text("from rlsim import loop\nimport rlsim.loop.sync as s\n")
    found = forbidden_imports(pkg, "rlsim.actors")
    assert found == [
        "actors/lazy.py:2 rlsim.loop.config.RunConfig",
        "actors/sub/rel.py:1 rlsim.loop.deadline",
        "actors/whole.py:1 rlsim.loop",
        "actors/whole.py:2 rlsim.loop.sync",
    ]
