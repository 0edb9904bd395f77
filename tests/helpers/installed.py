"""Skipping a test module whose optional dependency is not installed, without importing it.

``pytest.importorskip("vllm")`` at module level imports vLLM (about 5 s here) while the file is collected, in every
xdist worker and in ``make test-fast``, which deselects those tests anyway; ``find_spec`` only looks.
"""

from __future__ import annotations

import importlib.util

import pytest


def skip_module_unless_installed(name: str) -> None:
    """Skip the calling test module when ``name`` cannot be imported here (it is not imported now)."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed", allow_module_level=True)
