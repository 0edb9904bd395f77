"""Fixtures for the planner tests; the hand-made cases live in planner_cases.py."""

from __future__ import annotations

import pytest

from rlsim.planner.spec.cluster import NodeSpec


@pytest.fixture
def two_core_node() -> NodeSpec:
    return NodeSpec(count=1, cores=2, gpus=0, kind="test-kind")
