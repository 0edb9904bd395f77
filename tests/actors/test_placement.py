"""Presets to cores, pinning every thread of a process, and CPU accounting that includes children.

Pinning runs in a child process so the test process keeps its own affinity.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time

import pytest

from rlsim.actors.pinning import pin_process, process_tree_cpu_seconds
from rlsim.errors import RlsimError
from rlsim.placement import PlacementConfig, ResolvedPlacement, resolve_placement, split_pool


def test_shared_gives_every_role_the_whole_pool() -> None:
    out = resolve_placement(PlacementConfig(preset="shared"), [3, 1, 2])
    assert {r: p.cores for r, p in out.items()} == {"rollout": (1, 2, 3), "scorer": (1, 2, 3), "trainer": (1, 2, 3)}
    assert all(p.threads == 3 for p in out.values())


def test_split_gives_the_rollout_half_and_the_rest_the_other_half() -> None:
    out = resolve_placement(PlacementConfig(preset="split"), [0, 1, 2, 3, 4])
    assert out["rollout"].cores == (0, 1, 2)
    assert out["scorer"].cores == out["trainer"].cores == (3, 4)
    with pytest.raises(ValueError, match="at least 2 cores"):
        resolve_placement(PlacementConfig(preset="split"), [0])


def test_the_split_rule_rounds_the_rollout_half_up_and_sorts_the_pool() -> None:
    # 3 cores: generation (the longest phase) gets 2, scoring 1; the pool's order does not matter.
    assert split_pool([7, 5, 6]) == ([5, 6], [7])
    assert split_pool([0, 1]) == ([0], [1])
    with pytest.raises(ValueError, match="use preset shared"):
        split_pool([4])


def test_a_role_can_name_its_own_cores_threads_and_gpu() -> None:
    cfg = PlacementConfig.model_validate({"preset": "split", "trainer": {"cores": [0], "threads": 1, "gpu": 0.25}})
    out = resolve_placement(cfg, [0, 1])
    assert out["trainer"] == ResolvedPlacement((0,), 1, 0.25, 0.5)
    assert out["scorer"].cores == (1,)


def _pin_and_report(cores: list[int], queue: mp.Queue) -> None:
    # A thread started before pinning must be pinned too (os.sched_setaffinity(0) alone would miss it).
    stop = threading.Event()
    early = threading.Thread(target=stop.wait)
    early.start()
    try:
        pin_process(cores)
        tids = [int(t) for t in os.listdir("/proc/self/task")]
        queue.put(("ok", sorted({tuple(sorted(os.sched_getaffinity(t))) for t in tids})))
    except RlsimError as err:
        queue.put(("error", str(err)))
    finally:
        stop.set()
        early.join()


def _in_child(cores: list[int]) -> tuple[str, object]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_pin_and_report, args=(cores, queue))
    proc.start()
    result = queue.get(timeout=60)
    proc.join(timeout=30)
    return result


def test_pinning_covers_every_thread_of_the_process() -> None:
    core = min(os.sched_getaffinity(0))
    status, masks = _in_child([core])
    assert status == "ok" and masks == [(core,)]


def test_pinning_to_a_missing_core_is_an_error_naming_the_fix() -> None:
    status, message = _in_child([os.cpu_count() + 7])
    assert status == "error" and "placement" in str(message)


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cpu_seconds_include_child_processes() -> None:
    before = process_tree_cpu_seconds()
    child = mp.get_context("spawn").Process(target=_burn, args=(0.6,))
    child.start()
    child.join(timeout=60)
    # The child burned >= 0.6 CPU-s and was reaped, so it counts in our children's times.
    assert process_tree_cpu_seconds() - before >= 0.5
