"""Faults on the http runtime's server, applied by the scoring worker to a real ``rlsim serve`` process.

A killed server is replaced by the reward stage and the batch scored again (same rewards); a stall
shorter than the client's deadline is answered late by the same server; a longer one fails the call
with the deadline error naming the run-config setting, and the server is resumed, not left frozen.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psutil
import pytest

from rlsim.actors.server_faults import ServerFault, server_fault
from rlsim.actors.workers import ScoringWorker
from rlsim.errors import RlsimError
from rlsim.loop.roles.reward_stage import RewardStage, RewardStageSettings
from rlsim.rollout.types import Rollout
from tests.helpers.loop_doubles import FakeStage

# Every test here but the last shares one worker whose http runtime starts an `rlsim serve` process with a real
# model, and waits out stalls and a restart: slow, as tests/serve/test_serve_process.py marks its server tests.
DEADLINE_S = 3.0
ROLLOUTS = [Rollout(uid, uid // 2, [1, 2, 3], [100 + uid] * (4 + uid)) for uid in range(6)]


@pytest.fixture(scope="module")
def worker(tiny_policy) -> Iterator[ScoringWorker]:
    settings = RewardStageSettings(
        runtime="http", server_runtime="eager", threads=1, max_length=64, batch_size=4, http_deadline_s=DEADLINE_S
    )
    w = ScoringWorker("scorer-0", None, lambda: RewardStage(tiny_policy, settings), pin=False)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture(scope="module")
def unfaulted(worker: ScoringWorker) -> dict[int, float]:
    rewards, _ = worker.score(ROLLOUTS, 0)
    assert sorted(rewards) == list(range(6))
    return rewards


@pytest.mark.slow
def test_a_stall_shorter_than_the_deadline_is_answered_late_by_the_same_server(worker, unfaulted) -> None:
    pid = worker.server_pid()
    t0 = time.monotonic()
    rewards, _ = worker.score(ROLLOUTS, 1, ServerFault("stall", 1.0))
    assert time.monotonic() - t0 >= 1.0  # the server really was frozen for the stall
    assert rewards == unfaulted and worker.server_pid() == pid


@pytest.mark.slow
def test_a_stall_past_the_deadline_fails_naming_the_setting_and_the_server_is_resumed(worker, unfaulted) -> None:
    pid = worker.server_pid()
    with pytest.raises(RlsimError, match=r"(?s)within 3 s.*reward\.http_deadline_s, now 3 s"):
        worker.score(ROLLOUTS, 2, ServerFault("stall"))
    assert psutil.Process(pid).status() != psutil.STATUS_STOPPED
    rewards, _ = worker.score(ROLLOUTS, 3)  # not restarted: the same server answers again
    assert rewards == unfaulted and worker.server_pid() == pid


@pytest.mark.slow
def test_a_killed_server_is_replaced_and_the_batch_scored_again(worker, unfaulted) -> None:
    old = worker.server_pid()
    restarts = worker.stage.server_restarts
    rewards, [event] = worker.score(ROLLOUTS, 4, ServerFault("kill"))
    assert rewards == unfaulted and event.items == 6  # every rollout scored, once, as before
    assert worker.server_pid() not in (None, old) and worker.stage.server_restarts == restarts + 1
    assert not psutil.pid_exists(old) or psutil.Process(old).status() == psutil.STATUS_ZOMBIE


def test_a_server_fault_needs_a_runtime_with_a_server() -> None:
    with pytest.raises(RlsimError, match="need reward.runtime: http"):
        with server_fault(FakeStage(), ServerFault("kill")):
            pass
