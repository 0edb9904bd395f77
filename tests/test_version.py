"""One version source: pyproject.toml's ``version``, carried to ``rlsim.__version__`` by the package metadata."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rlsim

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_pyprojects() -> None:
    # A regex, not tomllib: tomllib is 3.11+ and the package supports 3.10.
    declared = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert rlsim.__version__ == declared


def test_no_second_copy_of_the_version_in_the_package() -> None:
    # A literal like __version__ = "1.2.3" anywhere under rlsim/ would be a second source that drifts.
    copies = [
        p
        for p in (ROOT / "rlsim").rglob("*.py")
        if re.search(r"""__version__\s*=\s*["']""", p.read_text(encoding="utf-8"))
    ]
    assert copies == []


def test_unknown_attribute_still_raises() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        rlsim.no_such_thing  # noqa: B018 - the attribute access is the test
