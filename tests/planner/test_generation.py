"""The closed-form continuous-batching engine against a per-iteration reference and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlsim.planner.profile.schema import GenerationModel
from rlsim.planner.sim.generation import completion_work_s, deal
from tests.helpers.planner_cases import EXACT


def _model(base: float, per_seq: float, prefill: float = 0.0, max_running: int = 64) -> GenerationModel:
    return GenerationModel(
        device="cpu",
        units=1,
        base_s=base,
        per_seq_s=per_seq,
        prefill_s_per_token=prefill,
        max_running=max_running,
        fit=EXACT,
    )


def reference_engine(responses: list[int], prompts: list[int], slots: int, model: GenerationModel) -> list[float]:
    """One decode iteration at a time: FIFO admission into free slots, prefill in the admitting iteration."""
    queue, running, done, now = list(range(len(responses))), {}, {}, 0.0
    while queue or running:
        while queue and len(running) < slots:
            j = queue.pop(0)
            running[j] = responses[j]
            now += prompts[j] * model.prefill_s_per_token
        now += model.step_s(len(running), 1)
        for j in list(running):
            running[j] -= 1
            if running[j] == 0:
                done[j] = now
                del running[j]
    return [done[j] for j in range(len(responses))]


def test_two_sequences_by_hand() -> None:
    # Lengths 10 and 20, iteration 0.1 + 0.05 n: 10 iterations at n=2 (0.2 s) -> 2.0 s, then 10 at
    # n=1 (0.15 s) -> 3.5 s.
    batch = deal(np.array([0, 0]), np.array([10, 20]), engines=1)
    done = completion_work_s(batch, _model(0.1, 0.05), engine_units=1, max_running=8)
    assert done[0].tolist() == pytest.approx([2.0, 3.5])


def test_prefill_is_paid_at_admission() -> None:
    # One slot: each request waits for the previous; 5 prompt tokens x 0.01 s each admission.
    batch = deal(np.array([5, 5, 5]), np.array([10, 10, 10]), engines=1)
    done = completion_work_s(batch, _model(0.1, 0.0, prefill=0.01), engine_units=1, max_running=1)
    assert done[0].tolist() == pytest.approx([1.05, 2.10, 3.15])


def test_more_units_run_faster_by_the_exponent() -> None:
    batch = deal(np.array([0]), np.array([10]), engines=1)
    model = _model(0.1, 0.0).model_copy(update={"unit_exponent": 0.5})
    assert completion_work_s(batch, model, engine_units=4, max_running=4)[0, 0] == pytest.approx(1.0 / 2)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=25),
    slots=st.integers(1, 6),
    engines=st.integers(1, 4),
    prefill=st.sampled_from([0.0, 0.003]),
)
def test_matches_per_iteration_reference(lengths: list[int], slots: int, engines: int, prefill: float) -> None:
    responses = np.array(lengths)
    prompts = (np.arange(len(lengths)) % 7 + 1) * 3
    model = _model(0.02, 0.005, prefill=prefill)
    batch = deal(prompts, responses, engines)
    got = completion_work_s(batch, model, engine_units=1, max_running=slots)
    for e in range(batch.valid.shape[0]):
        mine = batch.index[e][batch.valid[e]]
        expected = reference_engine(responses[mine].tolist(), prompts[mine].tolist(), slots, model)
        assert got[e][batch.valid[e]].tolist() == pytest.approx(expected)


def test_deal_gives_every_rollout_to_exactly_one_engine() -> None:
    batch = deal(np.arange(10), np.arange(10) + 100, engines=4)
    placed = batch.index[batch.valid]
    assert sorted(placed.tolist()) == list(range(10))
    assert batch.valid.sum(axis=1).tolist() == [3, 3, 2, 2]
    assert batch.responses[batch.valid].tolist() == (np.arange(10) + 100)[placed].tolist()
