"""The scoring router: least outstanding calls, ties by calls sent, the dead replica left out of a re-send."""

from __future__ import annotations

import random

import pytest

from rlsim.replica_router import ReplicaRouter


def test_a_burst_of_256_calls_spreads_over_3_replicas_within_one_of_even() -> None:
    router = ReplicaRouter(3)
    for _ in range(256):
        router.sent(router.pick(), rollouts=4)
    calls = [load.calls for load in router.loads]
    assert sum(calls) == 256 and max(calls) - min(calls) <= 1
    assert [load.outstanding for load in router.loads] == calls  # nothing came back: all still queued


def test_a_slow_replica_gets_fewer_calls_than_the_fast_ones() -> None:
    """Replica 2 answers one call in four the others answer: the router keeps sending where calls come back."""
    router, rng = ReplicaRouter(3), random.Random(0)
    for _ in range(300):
        router.sent(router.pick(), rollouts=1)
        for r in range(3):
            if router.loads[r].outstanding and rng.random() < (0.2 if r == 2 else 0.8):
                router.finished(r)
    calls = [load.calls for load in router.loads]
    assert sum(calls) == 300 and calls[2] < 0.6 * min(calls[:2])
    assert max(router.loads[2].depths) >= max(router.loads[0].depths)  # its queue ran deeper


def test_a_resend_avoids_the_dead_replica_unless_it_is_the_only_one() -> None:
    router = ReplicaRouter(3)
    assert router.pick(exclude={0}) == 1 and router.pick(exclude={0, 1}) == 2
    assert ReplicaRouter(1).pick(exclude={0}) == 0  # nothing else to send to: the restarted one
    router.sent(1, rollouts=2, resent=True)
    assert router.pick(exclude={0}) == 2  # replica 1 has one outstanding


def test_summaries_are_per_step_and_keep_what_is_still_outstanding() -> None:
    router = ReplicaRouter(2)
    for _ in range(3):
        router.sent(router.pick(), rollouts=4)
    router.finished(0)
    first = router.take_summary()
    assert [s["calls"] for s in first] == [2, 1] and [s["rollouts"] for s in first] == [8, 4]
    assert first[0]["max_queue_depth"] == 2 and first[0]["mean_queue_depth"] == 1.5
    second = router.take_summary()
    assert [s["calls"] for s in second] == [0, 0] and [load.outstanding for load in router.loads] == [1, 1]
    router.finished(0)
    router.finished(0)  # a second return of the same call does not go below zero
    assert router.loads[0].outstanding == 0


def test_a_router_needs_a_replica() -> None:
    with pytest.raises(ValueError, match="at least one replica"):
        ReplicaRouter(0)
