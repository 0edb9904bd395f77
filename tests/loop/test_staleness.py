"""The staleness buffer and ledger: groups whole, stale groups dropped and counted, every rollout one fate."""

from __future__ import annotations

import pytest

from rlsim.loop.schedules.asynchronous.staleness import Ledger, StalenessBuffer
from rlsim.rollout.types import Rollout


def rollouts(group: int, size: int = 2) -> list[Rollout]:
    return [Rollout(group * size + s, group, [1], [7] * (s + 1)) for s in range(size)]


def buffer(max_staleness: int, groups_per_batch: int = 2) -> StalenessBuffer:
    return StalenessBuffer(
        group_size=2, groups_per_batch=groups_per_batch, max_staleness=max_staleness, ledger=Ledger()
    )


def add(buf: StalenessBuffer, group: int, version: int) -> None:
    rs = rollouts(group)
    buf.ledger.generated(rs, version)
    buf.add(rs, {r.uid: 1.0 for r in rs})


def test_a_group_waits_until_all_its_members_are_scored() -> None:
    buf = buffer(1, groups_per_batch=1)
    a, b = rollouts(0)
    buf.ledger.generated([a, b], 0)
    buf.add([a], {a.uid: 0.5})
    assert buf.take_batch(0) is None and buf.queued == 1
    buf.add([b], {b.uid: 0.25})
    (group,) = buf.take_batch(0)
    assert [r.uid for r in group.rollouts] == [0, 1] and group.rewards == {0: 0.5, 1: 0.25}


def test_groups_older_than_the_bound_are_dropped_and_the_oldest_fresh_ones_taken() -> None:
    buf = buffer(max_staleness=1)
    for group, version in [(0, 0), (1, 1), (2, 2), (3, 1)]:
        add(buf, group, version)
    # A trainer at version 2 may use versions 1 and 2: group 0 (version 0) is two behind.
    batch = buf.take_batch(2)
    assert [(g.group, g.version) for g in batch] == [(1, 1), (3, 1)]  # oldest first, then by group
    assert buf.ledger.dropped == {0, 1}  # group 0's two rollouts
    assert buf.queued == 2  # group 2 waits for the next batch


def test_max_staleness_zero_keeps_only_the_current_version() -> None:
    buf = buffer(max_staleness=0, groups_per_batch=1)
    add(buf, 0, 0)
    add(buf, 1, 1)
    (group,) = buf.take_batch(1)
    assert group.version == 1 and buf.ledger.dropped == {0, 1}


def test_the_ledger_gives_every_rollout_one_fate() -> None:
    ledger = Ledger()
    ledger.generated(rollouts(0) + rollouts(1) + rollouts(2), 0)
    ledger.mark_trained([0, 1], trainer_version=1)
    ledger.mark_dropped([2, 3])
    assert ledger.totals() == {"generated": 6, "trained": 2, "dropped_stale": 2, "unfinished_at_end": 2}
    assert ledger.histogram() == {"1": 2}
    with pytest.raises(RuntimeError, match="already settled"):
        ledger.mark_dropped([0])
    with pytest.raises(RuntimeError, match="never generated"):
        ledger.mark_trained([99], 1)
    with pytest.raises(RuntimeError, match="generated twice"):
        ledger.generated(rollouts(0), 1)


def test_a_group_of_two_versions_counts_as_its_oldest() -> None:
    """Partial rollouts: a member that sampled nothing before a weight swap starts under the newer version;
    the group is as old as its oldest member, for the bound too."""
    for trainer_version, taken in [(1, True), (2, False)]:
        buf = buffer(max_staleness=1, groups_per_batch=1)
        a, b = rollouts(0)
        a.version_spans, b.version_spans = [(0, 0)], [(1, 0)]
        buf.ledger.generated([a, b], 0)  # each under the version it records
        assert buf.ledger.versions == {a.uid: 0, b.uid: 1}
        buf.add([b, a], {a.uid: 0.0, b.uid: 0.0})
        batch = buf.take_batch(trainer_version)
        if taken:
            assert batch is not None and batch[0].version == 0
        else:  # version 0 is two behind: the whole group goes, b with it although b alone is within the bound
            assert batch is None and buf.ledger.dropped == {a.uid, b.uid}


def test_without_partial_rollouts_a_group_of_two_versions_is_a_bug() -> None:
    """One generate call makes a whole group, so without recorded versions its members share one."""
    buf = buffer(1)
    a, b = rollouts(0)
    buf.ledger.generated([a], 0)
    buf.ledger.generated([b], 1)
    with pytest.raises(RuntimeError, match="mixes policy versions"):
        buf.add([a, b], {a.uid: 0.0, b.uid: 0.0})


def test_a_group_with_a_dropped_reward_is_dropped_whole_once_complete_and_counted_apart() -> None:
    buf = buffer(max_staleness=1, groups_per_batch=1)
    a, b = rollouts(0)
    buf.ledger.generated([a, b], 0)
    buf.add([a], {a.uid: float("nan")})
    assert buf.queued == 1  # waits for its group like any member
    buf.add([b], {b.uid: 1.0})
    assert buf.take_batch(0) is None and buf.queued == 0
    add(buf, 1, 0)
    (group,) = buf.take_batch(0)
    buf.ledger.mark_trained([r.uid for r in group.rollouts], 0)
    assert buf.ledger.totals() == {"generated": 4, "trained": 2, "dropped_stale": 0, "dropped_reward": 2,
                                   "unfinished_at_end": 0}  # fmt: skip
