"""Step breakdown from a hand-made timeline whose answers are worked out below."""

from __future__ import annotations

import pytest

from rlsim.loop.outputs.records import (
    breakdown,
    busiest_actor_gap,
    busy_by_actor,
    overall_overhead,
    timeline_rows,
    union_length,
)
from rlsim.rollout.types import Event
from rlsim.run_results import StepRecord


def ev(actor: str, phase: str, start: float, end: float, batch: int = 0) -> Event:
    return Event(actor, phase, batch, start, end, [0])


# Step from t=100 to t=110. Generation 100-104 in two micro-batches; scoring overlaps it (102-105);
# update 106-108; sync 108-108.5 on the trainer and 108.2-108.6 on the rollout actor.
EVENTS = [
    ev("rollout", "generate", 100, 102, 0),
    ev("rollout", "generate", 102, 104, 1),
    ev("scorer-0", "score", 102, 103.5, 0),
    ev("scorer-0", "score", 104, 105, 1),
    ev("trainer", "update", 106, 108),
    ev("trainer", "sync", 108, 108.5),
    ev("rollout", "sync", 108.2, 108.6),
]


def test_union_counts_overlap_once() -> None:
    assert union_length([(0, 2), (1, 3), (5, 6)]) == pytest.approx(4.0)
    assert union_length([(0, 1), (1, 2)]) == pytest.approx(2.0)
    assert union_length([]) == 0.0
    assert union_length([(3, 3), (4, 2)]) == 0.0  # empty and reversed intervals cover nothing


def test_breakdown_of_the_hand_timeline() -> None:
    t = breakdown(EVENTS, 100, 110)
    # generate: 100-104 = 4; score: 102-103.5 + 104-105 = 2.5; update 2; sync 108-108.6 = 0.6.
    # busy: 100-105 (5) + 106-108.6 (2.6) = 7.6, so idle = 10 - 7.6 = 2.4.
    assert t == pytest.approx({"generate": 4.0, "score": 2.5, "update": 2.0, "sync": 0.6, "idle": 2.4, "total": 10.0})


def test_events_are_clipped_to_the_step() -> None:
    t = breakdown([ev("rollout", "generate", 95, 101)], 100, 102)
    assert t["generate"] == pytest.approx(1.0) and t["idle"] == pytest.approx(1.0)


def test_busy_per_actor_and_busiest_gap() -> None:
    busy = busy_by_actor(EVENTS, 100, 110)
    # rollout: 100-104 + 108.2-108.6 = 4.4; scorer: 2.5; trainer: 106-108.5 = 2.5.
    assert busy == pytest.approx({"rollout": 4.4, "scorer-0": 2.5, "trainer": 2.5})
    assert busiest_actor_gap(EVENTS, 100, 110) == pytest.approx((10 - 4.4) / 10)


def test_overall_overhead_weights_steps_by_length() -> None:
    times = [{"idle": 1.0, "total": 10.0}, {"idle": 0.0, "total": 30.0}]
    steps = [
        StepRecord(step=i, time_s={"generate": 0, "score": 0, "update": 0, "sync": 0} | t, rollouts={"generated": 1})
        for i, t in enumerate(times, start=1)
    ]
    assert overall_overhead(steps) == pytest.approx(1.0 / 40.0)
    assert overall_overhead([]) == 0.0


def test_timeline_rows_are_relative_to_the_step_start_and_sorted() -> None:
    rows = timeline_rows(3, list(reversed(EVENTS)), 100)
    assert [r["start"] for r in rows] == sorted(r["start"] for r in rows)
    assert rows[0] == {**rows[0], "step": 3, "actor": "rollout", "phase": "generate", "start": 0.0, "end": 2.0}


def test_gpu_seconds_are_busy_time_times_the_share() -> None:
    from rlsim.loop.outputs.records import gpu_seconds

    events = [
        Event("rollout", "generate", 0, 0, 4, [0], gpu=0.5),
        Event("rollout", "sync", 0, 5, 6, [0], gpu=0.5),
        Event("scorer-0", "score", 0, 1, 3, [0], gpu=0.0),
    ]
    assert gpu_seconds(events, 0, 10) == {"rollout": pytest.approx(2.5)}  # (4 + 1) s x 0.5; no share, no entry
