"""Capacity arithmetic on the recorded rows of recorded.py, every expected value worked out by hand."""

from __future__ import annotations

import pytest

from rlsim.experiment.capacity import capacity_samples, generation_cost_per_rollout, per_repeat, values
from tests.helpers.recorded import POOL_CORES, rows


@pytest.fixture(scope="module")
def per():
    return per_repeat(rows())


def test_steps_are_averaged_within_a_repeat_before_anything_else(per) -> None:
    # eager repeat 0 ran two together steps with 2.9 and 3.1 scoring core-s: one sample, 3.0.
    assert values(per, "eager", "together.score_core_s") == pytest.approx([3.0, 3.2, 3.4])
    assert values(per, "fast", "together.score_core_s") == pytest.approx([1.0, 1.1, 1.2])


def test_generation_cost_per_rollout_pools_every_runtime_of_a_repeat(per) -> None:
    # repeat 0: (0.4 + 0.6) / 2 = 0.5; repeats 1 and 2: (0.5 + 0.5) / 2 = 0.5.
    assert generation_cost_per_rollout(per) == pytest.approx({0: 0.5, 1: 0.5, 2: 0.5})


def test_freed_capacity_is_paired_with_the_baseline_in_the_same_repeat(per) -> None:
    cap = capacity_samples(per, "fast", "eager", POOL_CORES)
    # freed = eager - fast scoring core-s: 3.0-1.0, 3.2-1.1, 3.4-1.2
    assert cap["freed_core_s"] == pytest.approx([2.0, 2.1, 2.2])
    # share of the pool in a baseline step = freed / (2 cores x eager step): 2/20, 2.1/22, 2.2/24
    assert cap["freed_pool_share"] == pytest.approx([0.1, 2.1 / 22, 2.2 / 24])
    # extra rollouts per step = freed / 0.5 core-s per rollout
    assert cap["extra_rollouts_per_step"] == pytest.approx([4.0, 4.2, 4.4])
    # generation tokens/s together: 110-100, 112-100, 114-100
    assert cap["extra_gen_tokens_per_s"] == pytest.approx([10.0, 12.0, 14.0])
    # time-boxed rollouts per hour: 1500-1000, 1500-1100, 1500-1200
    assert cap["extra_rollouts_per_hour"] == pytest.approx([500.0, 400.0, 300.0])
    assert cap["freed_gpu_s"] == pytest.approx([0.0, 0.0, 0.0])


def test_the_baseline_frees_nothing_against_itself(per) -> None:
    cap = capacity_samples(per, "eager", "eager", POOL_CORES)
    assert cap["freed_core_s"] == [0.0, 0.0, 0.0]
    assert cap["extra_rollouts_per_hour"] == [0.0, 0.0, 0.0]


def test_a_missing_baseline_gives_no_samples_instead_of_failing(per) -> None:
    # Partial results are analysed after every runtime block, before the baseline may have run.
    assert capacity_samples({"fast": per["fast"]}, "fast", "eager", POOL_CORES) == {}


def test_pool_time_bar_merges_idle_scorers_into_orchestration(per) -> None:
    # orchestration 0.3 + idle scorers 0.1; idle = 2 x step - everything else, e.g. eager repeat 1:
    # 22 - (8 + 3.2 + 6 + 0.3 + 0.1 + 1.0 + 0.1) = 3.3
    assert values(per, "eager", "together.pool.orchestration") == pytest.approx([0.4, 0.4, 0.4])
    assert values(per, "eager", "together.pool.idle")[1] == pytest.approx(3.3)
    assert values(per, "fast", "together.pool.score") == pytest.approx([1.0, 1.1, 1.2])
