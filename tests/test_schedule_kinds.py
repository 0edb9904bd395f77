"""The schedule registry: every name configs accept has an entry whose functions load, unknown names are refused
naming the valid ones, and no module outside the registry compares a loop schedule's name."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import get_args

import pytest

from rlsim.errors import RlsimError
from rlsim.schedule_kinds import SCHEDULES, ScheduleName, schedule_kind

RLSIM = Path(__file__).resolve().parents[1] / "rlsim"
# modules whose ``schedule`` is another vocabulary than the loop's
OTHER_VOCABULARY = {
    "rlsim/planner/spec/gpu_run.py": "GpuRunConfig.schedule is NeMo-RL's sync/async knob (GpuRunConfig.off_policy)",
}


def test_every_accepted_name_has_an_entry_and_nothing_else_does() -> None:
    assert tuple(SCHEDULES) == get_args(ScheduleName)
    assert all(kind.name == name for name, kind in SCHEDULES.items())


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_each_entry_names_functions_that_exist(name: str) -> None:
    kind = SCHEDULES[name]
    loop_step, simulator = kind.load(kind.loop_step), kind.load(kind.simulator)
    assert list(inspect.signature(loop_step).parameters) == ["session", "step", "schedule", "progress"]
    assert callable(simulator)


def test_an_unknown_schedule_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(RlsimError, match="unknown schedule 'lockstep'; valid: sequential, overlapped, async"):
        schedule_kind("lockstep")


def test_a_pipelined_schedule_streams_and_corrects_for_the_lag() -> None:
    """What the loop relies on: a schedule that runs generation ahead also scores while generating and trains with
    the generator's own log-probs (there is no on-policy trainer for a lagging batch)."""
    for kind in SCHEDULES.values():
        if kind.pipelined:
            assert kind.streams and kind.behaviour_logprobs, kind.name
        if kind.weight_swap_mid_call:
            assert kind.pipelined, kind.name


def _compares_a_schedule_name(node: ast.Compare) -> bool:
    names = set(SCHEDULES)
    operands = [node.left, *node.comparators]
    for operand in operands:
        if isinstance(operand, ast.Constant) and operand.value in names:
            return any(isinstance(o, ast.Attribute) and "schedule" in o.attr for o in operands) or any(
                isinstance(o, ast.Name) and "schedule" in o.id for o in operands
            )
    return False


def test_no_module_compares_schedule_names_outside_the_registry() -> None:
    """A schedule is asked what it does (``schedule_kind(name).streams``), never compared by name: a new schedule
    is then one entry, not a hunt through the code."""
    found = []
    for path in sorted(RLSIM.rglob("*.py")):
        if path.name == "schedule_kinds.py" or str(path.relative_to(RLSIM.parent)) in OTHER_VOCABULARY:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and _compares_a_schedule_name(node):
                found.append(f"{path.relative_to(RLSIM.parent)}:{node.lineno}")
    assert not found, f"compare schedule names via rlsim.schedule_kinds instead: {found}"
