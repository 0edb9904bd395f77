"""The heap event loop's ordering and the speed profiles that apply contention."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.planner.sim.events import EventLoop, SpeedProfile


def test_events_run_in_time_order_and_ties_in_schedule_order() -> None:
    loop, seen = EventLoop(), []
    for time_s, name in ((2.0, "c"), (1.0, "a"), (2.0, "d"), (1.5, "b")):
        loop.schedule(time_s, lambda t, n=name: seen.append((t, n)))
    loop.schedule(1.0, lambda t: loop.schedule(1.2, lambda t2: seen.append((t2, "child"))))
    loop.run()
    assert seen == [(1.0, "a"), (1.2, "child"), (1.5, "b"), (2.0, "c"), (2.0, "d")]


def test_speed_profile_by_hand_and_inverse() -> None:
    # Speed 0.5 on [1, 3), 1 elsewhere: 4 s of work started at 0 ends at 1 + 2 x 1 ... = 5 s.
    sp = SpeedProfile([0.0, 1.0, 3.0], [1.0, 0.5, 1.0])
    assert sp.work_at(3.0) == pytest.approx(2.0)
    assert sp.end_time(0.0, 4.0) == pytest.approx(5.0)
    work = np.linspace(0, 10, 41)
    times = sp.times_at(work)
    assert [sp.work_at(t) for t in times] == pytest.approx(work.tolist())


def test_speed_from_load_counts_overlapping_intervals() -> None:
    # Two of two replicas busy on [1, 2), one on [2, 3): slowdown 1 -> speeds 0.5 then 2/3.
    sp = SpeedProfile.from_load(np.array([1.0, 1.0]), np.array([2.0, 3.0]), capacity=2, slowdown=1.0)
    assert sp.work_at(2.0) == pytest.approx(1.0 + 0.5)
    assert sp.work_at(3.0) == pytest.approx(1.5 + 2 / 3)
    assert sp.work_at(10.0) == pytest.approx(1.5 + 2 / 3 + 7)


def test_from_ends_matches_from_load_with_zero_starts() -> None:
    import numpy as np

    from rlsim.planner.sim.events import SpeedProfile

    ends = [3.0, 1.0, 1.0, 0.0, 2.5]
    a = SpeedProfile.from_ends(ends, 5, 0.4)
    b = SpeedProfile.from_load([0.0] * 5, ends, 5, 0.4)
    work = np.linspace(0, 6, 25)
    assert np.allclose(a.times_at(work), b.times_at(work))
    # Hand check: 4 of 5 busy until t=1 (the one ending at 0 leaves at once): speed 1 / (1 + 0.4 x 4/5).
    assert a.work_at(1.0) == pytest.approx(1.0 / 1.32)
