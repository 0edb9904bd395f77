"""A package's ``__init__`` names its modules, so a newcomer finds a file from the package docstring (issue 24)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The packages whose docstring is their table of contents (the flat ones a newcomer lands in first).
LISTED = ["rlsim/loop", "rlsim/cli"]


@pytest.mark.parametrize("package", LISTED)
def test_the_package_docstring_names_every_module(package):
    folder = ROOT / package
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    modules = sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")
    unnamed = [m for m in modules if f"``{m}``" not in doc]
    assert not unnamed, f"{package}/__init__.py does not name {unnamed}"


def test_the_actors_docstring_cites_a_test_that_exists():
    doc = (ROOT / "rlsim/actors/__init__.py").read_text()
    cited = [word.strip("().;,") for word in doc.split() if word.startswith(("tests/", "(tests/"))]
    assert cited and all((ROOT / path.lstrip("(")).exists() for path in cited), cited
