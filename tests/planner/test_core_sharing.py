"""Processes sharing a pool of cores (sim/core_sharing.py), on cases worked out by hand."""

from __future__ import annotations

import math

import pytest

from rlsim.planner.sim.core_sharing import Call, GenerationClaim, busy_intervals, share_cores


def test_two_processes_on_one_pool_split_it_until_one_finishes() -> None:
    # Both want the whole 2-core pool: each runs at half speed. A (1 s of work) ends at 2 s, having let
    # B do 1 of its 2 s; B's last second runs alone at full speed: 3 s, the work of both (nothing idles).
    a, b = Call("a", "reference", 0.0, 1.0), Call("b", "values", 0.0, 2.0)
    assert share_cores([a, b], {"a": 2, "b": 2}, 2) == pytest.approx(3.0)
    assert (a.start, a.end) == pytest.approx((0.0, 2.0))
    assert (b.start, b.end) == pytest.approx((0.0, 3.0))


def test_roles_in_one_process_take_turns_in_the_order_sent() -> None:
    first, second = Call("p", "scorer-0", 0.0, 1.0, order=0), Call("p", "reference", 0.0, 2.0, order=1)
    assert share_cores([second, first], {"p": 2}, 2) == pytest.approx(3.0)
    assert (first.start, first.end) == pytest.approx((0.0, 1.0))
    assert (second.start, second.end) == pytest.approx((1.0, 3.0))


def test_processes_that_fit_the_pool_run_at_full_speed() -> None:
    a, b = Call("a", "reference", 0.0, 1.0), Call("b", "values", 0.0, 2.0)
    assert share_cores([a, b], {"a": 1, "b": 1}, 2) == pytest.approx(2.0)
    assert (a.end, b.end) == pytest.approx((1.0, 2.0))


def _generating_until(end: float, score_slowdown: float = 1.0, gen_slowdown: float = 1.0) -> GenerationClaim:
    """Generation on every engine of the node until ``end`` s."""
    return GenerationClaim(lambda t: (1.0, end) if t < end else (0.0, math.inf), score_slowdown, gen_slowdown)


def test_a_call_waits_for_its_release_and_generation_slows_it_by_the_contention_entry() -> None:
    # Released at 1 s; beside generation (score slowdown 1: half speed) until 2 s, 0.5 s of work done; full
    # speed after: 1.5 s left, ends at 3.5 s.
    late = Call("a", "values", 1.0, 2.0)
    assert share_cores([late], {"a": 2}, 2, _generating_until(2.0)) == pytest.approx(3.5)
    assert late.start == pytest.approx(1.0)
    assert busy_intervals([late], "values") == [pytest.approx((1.0, 3.5))]


def test_generation_is_one_more_claimant_of_the_pool_not_a_second_factor() -> None:
    # Slowdowns 1 and 1: beside one process wanting the pool, generation and it each run at half speed, so
    # generation claims as much as one such process (g = 1) and the pair gets the pool's full throughput
    # (eta = 1/2 + 1/2). Three such processes beside generation: a quarter each (eta / (3 + g)), not the
    # product of their split and generation's slowdown (1/3 x 1/2); each second of work ends at 4 s.
    calls = [Call(p, "reference", 0.0, 1.0) for p in "abc"]
    generation = _generating_until(100.0)
    assert share_cores(calls, {"a": 2, "b": 2, "c": 2}, 2, generation) == pytest.approx(4.0)
    assert generation.generation_rate(3.0) == pytest.approx(0.25)
    assert generation.generation_rate(1.0) == pytest.approx(0.5)


def test_one_pool_of_processes_beside_generation_is_the_scorers_contention_model() -> None:
    # Uneven slowdowns (score +300%, generation +100%): one process wanting at most the pool runs at
    # 1 / (1 + 3 x busy engines), generation at 1 / (1 + 1 x pools wanted), as the GRPO step has them.
    generation = GenerationClaim(lambda t: (0.5, math.inf), 3.0, 1.0)
    assert generation.process_rate(1.0, 0.5, 1.0) == pytest.approx(1 / 2.5)
    assert generation.process_rate(0.5, 0.5, 1.0) == pytest.approx(1 / 2.5)
    assert generation.process_rate(1.0, 0.0, 1.0) == 1.0
    assert generation.generation_rate(0.5) == pytest.approx(1 / 1.5)
    # Beyond one pool both split the pair's throughput by claim: g = 4 / 2, eta = 1/4 + 1/2.
    assert generation.process_rate(3.0, 1.0, 1.0) == pytest.approx(0.75 / (3 + 2))
    assert generation.generation_rate(3.0) == pytest.approx(0.75 * 2 / (3 + 2))


def test_generation_never_speeds_the_processes_up() -> None:
    # No measured contention (slowdowns 0) and processes oversubscribing the pool: their own split holds.
    generation = GenerationClaim(lambda t: (1.0, math.inf), 0.0, 0.0)
    assert generation.process_rate(3.0, 1.0, 0.4 / 3) == pytest.approx(0.4 / 3)


def test_a_call_of_an_unknown_process_is_refused() -> None:
    with pytest.raises(ValueError, match="no weight"):
        share_cores([Call("ghost", "values", 0.0, 1.0)], {"a": 1}, 2)


def test_oversubscribed_processes_lose_the_measured_share_of_the_pool() -> None:
    # Efficiency 0.5: two 1-second calls wanting the whole pool each get a quarter of it, and end at 4 s;
    # once one process would fit (not here: both end together), nothing is lost.
    a, b = Call("a", "update_actor", 0.0, 1.0), Call("b", "update_critic", 0.0, 1.0)
    assert share_cores([a, b], {"a": 2, "b": 2}, 2, efficiency=0.5) == pytest.approx(4.0)
    alone = Call("a", "update_actor", 0.0, 1.0)
    assert share_cores([alone], {"a": 2}, 2, efficiency=0.5) == pytest.approx(1.0)
