"""Scorer replicas and batchers in the event loop: release times, batch shapes, every rollout scored once."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.batching.token_budget import TokenBudgetBatcher
from rlsim.planner.sim.events import SpeedProfile
from rlsim.planner.sim.scoring import simulate_scoring, split_sorted
from rlsim.planner.spec.cluster import BatcherSpec

ONE = np.ones(1)


def _const(seconds: float):  # type: ignore[no-untyped-def]
    return lambda batch, padded: seconds


def test_fixed_batches_release_when_full_and_replicas_share_the_queue() -> None:
    # Arrivals 1..6, batches of 2 released at 2, 4, 6; two replicas, 3 s each:
    # r0 2-5, r1 4-7, r0 6-9 -> last reward at 9.
    out = simulate_scoring(
        np.arange(1.0, 7.0),
        np.full(6, 10),
        BatcherSpec(kind="fixed", batch_size=2),
        replicas=2,
        latency=_const(3.0),
        noise=ONE,
    )
    assert out.done_s == pytest.approx(9.0)
    assert out.batches == 3
    assert out.reward_s.tolist() == pytest.approx([5, 5, 7, 7, 9, 9])
    assert out.busy_s() == pytest.approx(9.0)


def test_dynamic_flushes_on_max_wait_and_grows_while_busy() -> None:
    # Size 4, wait 0.5. Arrivals 0, 0.1, 3, 3.1, 3.2, 3.3, 3.4. One replica of 1 s:
    # batch 1 = (0, 0.1) at 0.5 -> 1.5; batch 2: 3, 3.1, 3.2, 3.3 full at 3.3 -> 4.3;
    # batch 3: 3.4 waits until 3.9 (the replica is free at 4.3, so it leaves then) -> 5.3.
    arrive = np.array([0, 0.1, 3, 3.1, 3.2, 3.3, 3.4])
    spec = BatcherSpec(kind="dynamic", batch_size=4, max_wait_s=0.5)
    out = simulate_scoring(arrive, np.full(7, 10), spec, replicas=1, latency=_const(1.0), noise=ONE)
    assert out.batches == 3
    assert out.busy_starts[0] == pytest.approx([0.5, 3.3, 4.3])
    assert out.done_s == pytest.approx(5.3)


def test_dynamic_takes_everything_queued_up_to_the_size_when_a_replica_frees() -> None:
    # Everything arrives while the only replica is busy with the first item: the next batch is a
    # full 3 (size cap), then the remaining 2.
    arrive = np.array([0.0, 0.2, 0.3, 0.4, 0.5, 0.6])
    spec = BatcherSpec(kind="dynamic", batch_size=3, max_wait_s=0.0)
    out = simulate_scoring(arrive, np.full(6, 10), spec, replicas=1, latency=_const(2.0), noise=ONE)
    sizes = [int(np.sum(out.reward_s == end)) for end in out.busy_ends[0]]
    assert sizes == [1, 3, 2]


def test_sequential_sorted_batches_have_less_padding_than_fixed() -> None:
    rng = np.random.default_rng(0)
    tokens = rng.integers(10, 500, size=64)
    at_end = np.zeros(64)
    fixed = simulate_scoring(at_end, tokens, BatcherSpec(kind="fixed", batch_size=8), 1, lambda b, p: p * 1e-3, ONE)
    ordered = simulate_scoring(
        at_end, tokens, BatcherSpec(kind="sorted", batch_size=8, window=64), 1, lambda b, p: p * 1e-3, ONE
    )
    assert ordered.padded_tokens < fixed.padded_tokens
    assert ordered.done_s == pytest.approx(ordered.padded_tokens * 1e-3)


@pytest.mark.parametrize("budget", [600, 2048, 5000])
def test_token_budget_split_matches_rlsim_batching(budget: int) -> None:
    rng = np.random.default_rng(budget)
    tokens = rng.integers(5, 600, size=200)
    order = np.argsort(tokens, kind="stable")
    ours = [b.tolist() for b in split_sorted(order, tokens, BatcherSpec(kind="token-budget", token_budget=budget))]
    theirs = TokenBudgetBatcher(budget).plan(tokens.tolist())
    assert ours == theirs


def test_every_rollout_scored_exactly_once_under_contention() -> None:
    rng = np.random.default_rng(3)
    arrive = np.sort(rng.uniform(0, 10, 100))
    speeds = [SpeedProfile([0.0, 5.0], [0.5, 1.0]), SpeedProfile.constant()]
    spec = BatcherSpec(kind="sorted", batch_size=7, window=20)
    out = simulate_scoring(
        arrive,
        rng.integers(1, 50, 100),
        spec,
        replicas=4,
        latency=_const(0.3),
        noise=ONE,
        speeds=speeds,
        replica_node=lambda r: r // 2,
    )
    assert np.all(out.reward_s >= arrive)
    assert sum(len(s) for s in out.busy_starts) == out.batches == 15
    # Replicas 0 and 1 (node 0) run at half speed before 5 s: a batch started at 0.. takes 0.6 s there.
    first_node0 = [e - s for r in (0, 1) for s, e in zip(out.busy_starts[r], out.busy_ends[r], strict=True) if e <= 5.0]
    assert first_node0 and all(d == pytest.approx(0.6) for d in first_node0)


def test_round_robin_sequential_gives_each_replica_one_slice_like_the_loop() -> None:
    from rlsim.loop.schedules.step import split_evenly
    from rlsim.planner.sim.scoring import simulate_round_robin

    # Five rollouts at 0 over two replicas: slices as the loop's split_evenly cuts them (2 and 3);
    # batches of 2 at 1 s: replica 0 ends at 1, replica 1 runs 2 + 1 -> ends at 2.
    assert [len(p) for p in split_evenly(list(range(5)), 2)] == [2, 3]
    out = simulate_round_robin(
        np.zeros(5), np.full(5, 10), BatcherSpec(kind="fixed", batch_size=2), 2, _const(1.0), ONE, sequential=True
    )
    assert out.busy_ends == [[1.0], [1.0, 2.0]]
    assert out.reward_s.tolist() == [1.0, 1.0, 1.0, 1.0, 2.0]


def test_round_robin_overlapped_deals_micro_batches_in_turn() -> None:
    from rlsim.planner.sim.scoring import simulate_round_robin

    # Micro-batches of 2 finishing at 2, 4, 6 go to replicas 0, 1, 0; each call is one 3 s batch.
    out = simulate_round_robin(
        np.arange(1.0, 7.0), np.full(6, 10), BatcherSpec(kind="sorted", batch_size=8, window=2), 2, _const(3.0), ONE
    )
    assert out.busy_starts == [[2.0, 6.0], [4.0]]
    assert out.done_s == pytest.approx(9.0)


def test_round_robin_call_overhead_is_paid_once_per_call() -> None:
    from rlsim.planner.sim.scoring import simulate_round_robin

    # One replica; calls of 4 rollouts (window 4) arrive at 4 and 8, each split into two 1 s batches
    # (batch_size 2) plus 0.5 s per call: call 1 runs 4 -> 6.5, call 2 runs 8 -> 10.5.
    out = simulate_round_robin(
        np.arange(1.0, 9.0),
        np.full(8, 10),
        BatcherSpec(kind="fixed", batch_size=2, window=4),
        1,
        _const(1.0),
        ONE,
        call_overhead_s=0.5,
    )
    assert out.busy_starts == [[4.0, 5.5, 8.0, 9.5]] and out.busy_ends == [[5.5, 6.5, 9.5, 10.5]]
    assert out.done_s == pytest.approx(10.5)


def test_union_of_busy_intervals_counts_overlap_once() -> None:
    from rlsim.planner.sim.scoring import ScoringOutcome
    from rlsim.planner.sim.step import union_s

    out = ScoringOutcome(
        done_s=0,
        batches=0,
        padded_tokens=0,
        real_tokens=0,
        busy_starts=[[0.0, 5.0], [1.0, 9.0]],
        busy_ends=[[2.0, 6.0], [3.0, 9.5]],
    )
    assert union_s(out) == pytest.approx(3.0 + 1.0 + 0.5)


def test_a_runtime_that_pads_nothing_costs_its_real_tokens() -> None:
    """vLLM's pooling runner schedules rows itself (``ScorerLatencyModel.pads`` false): a batch of lengths 10 and
    100 costs 110 tokens, not 2 x 100, in both simulators."""
    from rlsim.planner.sim.scoring import simulate_round_robin

    arrive, tokens = np.zeros(2), np.array([10, 100])
    spec = BatcherSpec(kind="fixed", batch_size=2, window=2)
    per_token = lambda batch, padded: padded * 0.01  # noqa: E731
    for sim in (simulate_scoring, simulate_round_robin):
        padded = sim(arrive, tokens, spec, replicas=1, latency=per_token, noise=ONE)
        real = sim(arrive, tokens, spec, replicas=1, latency=per_token, noise=ONE, pads=False)
        assert (padded.padded_tokens, real.padded_tokens) == (200, 110), sim.__name__
        assert (padded.done_s, real.done_s) == pytest.approx((2.0, 1.1)), sim.__name__
