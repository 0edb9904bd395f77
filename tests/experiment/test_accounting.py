"""Pool accounting: process trees, kernel counters and the identity, on known tables and on this machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from rlsim.experiment.accounting import (
    PoolAccountant,
    Snapshot,
    assign_groups,
    online_cores,
    parse_proc_stat,
    pool_time,
    process_deltas,
)

# pid: (ppid, own cpu s, reaped children's cpu s). The driver (100) started Ray's raylet (101), which
# started the three actors; vLLM's engine (201) is the rollout actor's child, the http server (301)
# the scorer's; 500 is another tenant's process under init (1).
TABLE = {
    1: (0, 0.5, 0.0),
    100: (1, 1.0, 0.0),
    101: (100, 2.0, 0.0),
    200: (101, 5.0, 0.0),
    201: (200, 7.0, 0.0),
    300: (101, 3.0, 0.0),
    301: (300, 1.5, 0.0),
    400: (101, 4.0, 0.0),
    500: (1, 9.0, 0.0),
}
ROOTS = {"generate": [200], "score": [300], "update": [400]}


def test_groups_own_their_whole_process_trees() -> None:
    owner = assign_groups(TABLE, ROOTS, driver=100)
    assert {pid: owner[pid] for pid in (200, 201, 300, 301, 400)} == {
        200: "generate",
        201: "generate",
        300: "score",
        301: "score",
        400: "update",
    }
    assert (owner[100], owner[101], owner[1], owner[500]) == ("orchestration", "orchestration", "other", "other")
    # a root that is gone claims nothing: its would-be tree stays with the driver
    assert assign_groups(TABLE, {"generate": [999]}, driver=100)[200] == "orchestration"


def test_a_reaped_child_counts_only_what_it_did_in_the_interval() -> None:
    # 201 had used 7 s at the first snapshot, ran 1 s more, exited and was reaped by 200, whose
    # children counter jumps by its whole 8 s; 200 itself ran 0.5 s. The interval's share: 1.5 s.
    before = {200: (101, 5.0, 0.0), 201: (200, 7.0, 0.0)}
    after = {200: (101, 5.5, 8.0)}
    assert process_deltas(before, after) == {200: pytest.approx(1.5)}


def test_a_chain_that_exits_together_is_absorbed_once_by_the_nearest_living_ancestor() -> None:
    # A job: init (1) -> shell 50 (0.1 s so far) -> program 51 (100 s so far). In the interval the program
    # runs 2 s more and both exit; init's counter grows by 0.1 + 102 (the shell carried the program's).
    before = {1: (0, 0.5, 0.0), 50: (1, 0.1, 0.0), 51: (50, 100.0, 0.0)}
    after = {1: (0, 0.5, 102.1)}
    assert process_deltas(before, after) == {1: pytest.approx(2.0)}


def test_an_exit_nobody_in_view_reaps_loses_its_tail_not_its_history() -> None:
    # 500 (9 s so far) exits and its parent is not in view: no entry, and nothing goes negative.
    before = {1: (0, 0.5, 0.0), 500: (77, 9.0, 0.0)}
    after = {1: (0, 0.6, 0.0), 600: (1, 0.2, 0.0)}  # 600 started meanwhile: all of its 0.2 s
    assert process_deltas(before, after) == {1: pytest.approx(0.1), 600: pytest.approx(0.2)}


def test_a_child_not_reaped_yet_does_not_make_its_parent_negative() -> None:
    before = {1: (0, 0.5, 0.0), 500: (1, 9.0, 0.0)}
    after = {1: (0, 0.5, 0.0)}  # 500 gone, init's counter not yet grown: clamp at 0
    assert process_deltas(before, after) == {1: 0.0}


def test_pool_time_and_the_identity() -> None:
    before = Snapshot(
        100.0,
        {100: (1, 1.0, 0.0), 200: (100, 1.0, 0.0), 300: (100, 1.0, 0.0), 500: (1, 0.0, 0.0)},
        idle=5.0,
        kernel=0.1,
    )
    after = Snapshot(
        102.0,
        {100: (1, 1.2, 0.0), 200: (100, 2.5, 0.0), 300: (100, 1.5, 0.0), 500: (1, 0.5, 0.0)},
        idle=6.2,
        kernel=0.1,
    )
    p = pool_time(before, after, {"generate": [200], "score": [300]}, driver=100, cores=2)
    assert p.groups == pytest.approx({"generate": 1.5, "score": 0.5, "orchestration": 0.2, "other": 0.5})
    # 2 cores x 2 s = 4 core-s; accounted 1.5 + 0.5 + 0.2 + 0.5 + idle 1.2 + kernel 0 = 3.9
    assert p.pool_core_s == pytest.approx(4.0)
    assert p.accounted_core_s == pytest.approx(3.9)
    assert p.residual_fraction == pytest.approx(-0.025)
    assert p.within_tolerance
    # 3 cores: 6 core-s elapsed, 3.9 accounted
    assert not pool_time(before, after, {}, driver=100, cores=3).within_tolerance


def test_a_pool_smaller_than_the_machine_leaves_others_out_and_says_so() -> None:
    before = Snapshot(0.0, {500: (1, 0.0, 0.0)}, 0.0, 0.0)
    after = Snapshot(1.0, {500: (1, 5.0, 0.0)}, 1.0, 0.0)
    p = pool_time(before, after, {}, driver=100, cores=1, whole_machine=False)
    assert "other" not in p.groups and not p.checked and p.notes


PROC_STAT = """cpu  150 5 30 700 10 1 3 3 0 0
cpu0 100 5 20 300 10 1 2 3 0 0
cpu1 50 0 10 400 0 0 1 0 0 0
intr 1 2 3
"""


def test_parse_proc_stat_sums_idle_and_kernel_time_of_the_pool() -> None:
    # idle = (idle + iowait) / ticks = (300 + 10 + 400) / 100; kernel = (irq + softirq + steal) = (1+2+3 + 0+1+0) / 100
    assert parse_proc_stat(PROC_STAT, [0, 1], 100.0) == pytest.approx((7.1, 0.07))
    assert parse_proc_stat(PROC_STAT, [1], 100.0) == pytest.approx((4.0, 0.01))
    assert online_cores(PROC_STAT) == [0, 1]
    with pytest.raises(ValueError, match="cpu2"):
        parse_proc_stat(PROC_STAT, [0, 2], 100.0)


def _burn(cpu_s: float) -> None:
    start = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    x = 0
    while resource.getrusage(resource.RUSAGE_SELF).ru_utime - start < cpu_s:
        x += 1


def test_this_process_and_its_reaped_children_are_seen_by_process_accounting() -> None:
    acct = PoolAccountant(sorted(os.sched_getaffinity(0)))
    before = acct.snapshot()
    _burn(0.3)
    # A child that burns CPU and exits: its time must reach our tree through children_* counters.
    code = "import resource\nwhile resource.getrusage(resource.RUSAGE_SELF).ru_utime < 0.3: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
    p = acct.between(before, acct.snapshot(), {})
    assert p.groups["orchestration"] >= 0.55  # 0.3 here + 0.3 in the child, minus tick rounding
