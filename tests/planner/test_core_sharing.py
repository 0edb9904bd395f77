"""Processes sharing a pool of cores (sim/core_sharing.py), on cases worked out by hand."""

from __future__ import annotations

import math

import pytest

from rlsim.planner.sim.core_sharing import Call, busy_intervals, share_cores


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


def test_a_call_waits_for_its_release_and_the_speed_factor_applies() -> None:
    # Released at 1 s; half speed until 2 s (0.5 s of work done), full speed after: 1.5 s left, ends at 3.5 s.
    late = Call("a", "values", 1.0, 2.0)

    def speed(t: float) -> tuple[float, float]:
        return (0.5, 2.0) if t < 2.0 else (1.0, math.inf)

    assert share_cores([late], {"a": 2}, 2, speed) == pytest.approx(3.5)
    assert late.start == pytest.approx(1.0)
    assert busy_intervals([late], "values") == [pytest.approx((1.0, 3.5))]


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
