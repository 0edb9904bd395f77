"""The step driver and both schedules, in-process, with test doubles inside the real workers."""

from __future__ import annotations

import math
from functools import partial

import pytest

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.errors import RlsimError
from rlsim.loop.backends.local import InProcessBackend
from rlsim.loop.outputs.records import step_record
from rlsim.loop.schedules.step import run_step, split_evenly
from rlsim.loop.sync import WeightSync
from tests.helpers.loop_doubles import DroppingStage, FakeGenerator, FakeStage, FakeTrainer, requests


def backend(
    gen: FakeGenerator | None = None, stages: list[FakeStage] | None = None, sync: str = "auto"
) -> InProcessBackend:
    gen = gen or FakeGenerator()
    stages = stages or [FakeStage()]
    rollout = RolloutWorker("rollout", None, lambda: gen, pin=False)
    scorers = [ScoringWorker(f"scorer-{i}", None, partial(lambda s: s, s), pin=False) for i, s in enumerate(stages)]
    trainer = TrainerWorker("trainer", None, FakeTrainer, pin=False)
    return InProcessBackend(rollout, scorers, trainer, WeightSync(sync, 0.0))


def test_sequential_generates_then_scores_on_every_replica_then_updates_and_syncs() -> None:
    b = backend(stages=[FakeStage(), FakeStage()])
    reqs = requests(4, 3)
    out = run_step(b, "sequential", reqs, micro_batch=4)
    assert out.counts == {"requested": 12, "generated": 12, "scored": 12, "trained": 12}
    phases = [(e.actor, e.phase) for e in out.events]
    assert phases.count(("rollout", "generate")) == 1
    # 12 rollouts split 6 + 6 over two replicas, each scoring its half in one call.
    assert sorted(e.items for e in out.events if e.phase == "score") == [6, 6]
    assert {e.actor for e in out.events if e.phase == "score"} == {"scorer-0", "scorer-1"}
    assert ("trainer", "update") in phases and ("trainer", "sync") in phases and ("rollout", "sync") in phases
    uids, rewards = b.trainer.trainer.seen[0]
    assert sorted(uids) == list(range(12))
    assert all(rewards[r.uid] == r.response_tokens for r in reqs)  # FakeStage's reward = length
    assert out.sync.method == "fake-reload"


def test_overlapped_sends_each_micro_batch_to_the_next_replica_as_it_finishes() -> None:
    b = backend(stages=[FakeStage(), FakeStage()])
    out = run_step(b, "overlapped", requests(4, 3), micro_batch=5)
    n_batches = math.ceil(12 / 5)
    gen = [e for e in out.events if e.phase == "generate"]
    score = sorted((e for e in out.events if e.phase == "score"), key=lambda e: e.batch)
    assert len(gen) == len(score) == n_batches
    assert [e.items for e in score] == [5, 5, 2]
    assert [e.actor for e in score] == ["scorer-0", "scorer-1", "scorer-0"]  # round robin
    assert out.counts["scored"] == out.counts["trained"] == 12


@pytest.mark.parametrize("schedule", ["sequential", "overlapped"])
def test_a_lost_rollout_fails_the_step(schedule: str) -> None:
    with pytest.raises(RuntimeError, match="produced no rollout"):
        run_step(backend(FakeGenerator(drop=1)), schedule, requests(), micro_batch=4)


def test_a_rollout_scored_twice_fails_the_step() -> None:
    with pytest.raises(RuntimeError, match="scored twice"):
        run_step(backend(stages=[FakeStage(double=True)]), "overlapped", requests(), micro_batch=4)


def test_a_response_of_the_wrong_length_fails_the_step() -> None:
    with pytest.raises(RuntimeError, match="response tokens"):
        run_step(backend(FakeGenerator(short=True)), "sequential", requests(), micro_batch=4)


def test_auto_sync_falls_back_to_the_simulated_cost_once_and_says_why() -> None:
    gen = FakeGenerator(fail_reload=True)
    b = backend(gen, sync="auto")
    first = run_step(b, "sequential", requests(), micro_batch=4)
    assert first.sync.method == "simulated" and "reload failed" in first.sync.detail
    assert "cannot reload" in first.sync.detail
    # Later steps go straight to the simulated cost (no second failing reload).
    gen.fail_reload = False
    second = run_step(b, "sequential", requests(), micro_batch=4)
    assert second.sync.method == "simulated" and gen.reloads == []


def test_reload_sync_fails_loudly_and_simulated_never_reloads() -> None:
    with pytest.raises(RlsimError, match="trainer.sync"):
        run_step(backend(FakeGenerator(fail_reload=True), sync="reload"), "sequential", requests(), micro_batch=4)
    gen = FakeGenerator()
    out = run_step(backend(gen, sync="simulated"), "sequential", requests(), micro_batch=4)
    assert out.sync.method == "simulated" and gen.reloads == []


def test_step_record_has_the_results_schema() -> None:
    out = run_step(backend(), "overlapped", requests(), micro_batch=4)
    rec = step_record(1, "overlapped", out, {"rollout": 1.0}, {"prompt": 48, "generated": 100})
    written = rec.model_dump(mode="json")
    # The keys results.json has always had, in its order (the planner and committed files read them), then
    # ``metrics`` (verl's names, filled in by RunOutputs.add_step).
    assert list(written) == [
        "step",
        "schedule",
        "time_s",
        "rollouts",
        "cpu_s",
        "busy_s",
        "tokens",
        "gpu_s",
        "overhead_fraction",
        "busiest_actor_gap_fraction",
        "sync",
        "train",
        "metrics",
    ]
    assert list(written["time_s"]) == ["generate", "score", "update", "sync", "idle", "total"]
    assert written["rollouts"] == {"generated": 12, "scored": 12, "trained": 12}
    assert written["tokens"] == {"generated": 100, "prompt": 48}
    assert rec.cpu_s == {"rollout": 1.0}
    assert rec.overhead_fraction is not None and 0.0 <= rec.overhead_fraction <= 1.0


def test_unknown_schedule_is_refused() -> None:
    with pytest.raises(ValueError, match="valid: sequential, overlapped"):
        run_step(backend(), "pipelined", requests(), micro_batch=4)  # type: ignore[arg-type]


def test_split_evenly_keeps_order_and_balances() -> None:
    parts = split_evenly(list(range(7)), 3)  # type: ignore[arg-type]
    assert parts == [[0, 1], [2, 3, 4], [5, 6]]
    assert split_evenly([], 2) == [[], []]  # type: ignore[arg-type]


@pytest.mark.parametrize("schedule", ["sequential", "overlapped"])
def test_a_dropped_reward_leaves_its_whole_group_out_of_the_update_and_is_counted(schedule: str) -> None:
    # requests(4, 3): uid = group * 3 + sample; uids 1 and 7 are in groups 0 and 2
    b = backend(stages=[DroppingStage({1, 7}), DroppingStage({1, 7})])
    out = run_step(b, schedule, requests(4, 3), micro_batch=4)
    assert out.counts == {"requested": 12, "generated": 12, "scored": 12, "trained": 6, "dropped": 6}
    uids, rewards = b.trainer.trainer.seen[0]
    assert sorted(uids) == [3, 4, 5, 9, 10, 11] and all(math.isfinite(x) for x in rewards.values())
    record = step_record(1, schedule, out, {}, {"generated": 0})
    assert record.rollouts.model_dump() == {"generated": 12, "scored": 12, "trained": 6, "dropped": 6}
    assert record.reward_outcomes == {"dropped": 2, "timeouts": 2}


def test_a_nan_no_scorer_counted_fails_the_step_and_so_does_dropping_every_group() -> None:
    with pytest.raises(RuntimeError, match="1 rewards are NaN but the scorers dropped 0"):
        run_step(backend(stages=[DroppingStage({4}, counted=False)]), "sequential", requests(4, 3), micro_batch=4)
    with pytest.raises(RlsimError, match="every group of the step had a reward dropped.*on_timeout: default"):
        run_step(backend(stages=[DroppingStage({0, 3, 6, 9})]), "sequential", requests(4, 3), micro_batch=4)
