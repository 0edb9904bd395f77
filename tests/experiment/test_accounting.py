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
    group_core_seconds,
    online_cores,
    parse_proc_stat,
    pool_time,
)

# pid: (ppid, cpu seconds). The driver started Ray's raylet, which started the three actors; vLLM's
# engine is the rollout actor's child and the http server the scorer's; 500 is another tenant.
TABLE = {
    1: (0, 0.5), 100: (1, 1.0), 101: (100, 2.0), 200: (101, 5.0), 201: (200, 7.0),
    300: (101, 3.0), 301: (300, 1.5), 400: (101, 4.0), 500: (1, 9.0),
}


def test_groups_own_their_whole_process_trees() -> None:
    groups = group_core_seconds(TABLE, {"generate": [200], "score": [300], "update": [400]}, driver=100)
    # generate 5 + 7, score 3 + 1.5, update 4, orchestration = driver 1 + raylet 2, other = init 0.5 + 9
    assert groups == {"generate": 12.0, "score": 4.5, "update": 4.0, "orchestration": 3.0, "other": 9.5}
    assert sum(groups.values()) == pytest.approx(sum(cpu for _, cpu in TABLE.values()))


def test_a_root_that_is_gone_counts_nothing() -> None:
    groups = group_core_seconds(TABLE, {"generate": [999]}, driver=100)
    assert groups["generate"] == 0.0 and groups["orchestration"] == 3.0 + 5 + 7 + 3 + 1.5 + 4


def test_pool_time_and_the_identity() -> None:
    before = Snapshot(100.0, {"generate": 1.0, "score": 1.0, "other": 0.0}, idle=5.0, kernel=0.1)
    after = Snapshot(102.0, {"generate": 2.5, "score": 1.5, "other": 0.5, "orchestration": 0.2}, idle=6.2, kernel=0.1)
    p = pool_time(before, after, cores=2)
    # 2 cores x 2 s = 4 core-s; accounted 1.5 + 0.5 + 0.5 + 0.2 (orchestration from 0) + idle 1.2 + kernel 0
    assert p.pool_core_s == pytest.approx(4.0)
    assert p.accounted_core_s == pytest.approx(3.9)
    assert p.residual_fraction == pytest.approx(-0.025)
    assert p.within_tolerance
    assert not pool_time(before, after, cores=3).within_tolerance  # 6 core-s elapsed, 3.9 accounted


def test_a_pool_smaller_than_the_machine_leaves_others_out_and_says_so() -> None:
    before = Snapshot(0.0, {"other": 0.0}, 0.0, 0.0)
    after = Snapshot(1.0, {"other": 5.0}, 1.0, 0.0)
    p = pool_time(before, after, cores=1, whole_machine=False)
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
    before = acct.snapshot({})
    _burn(0.3)
    # A child that burns CPU and exits: its time must reach our tree through children_* counters.
    code = "import resource\nwhile resource.getrusage(resource.RUSAGE_SELF).ru_utime < 0.3: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
    p = acct.between(before, acct.snapshot({}))
    assert p.groups["orchestration"] >= 0.55  # 0.3 here + 0.3 in the child, minus tick rounding
