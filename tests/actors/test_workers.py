"""The workers around the roles: events per piece of work, streamed event spans, weights handed over."""

from __future__ import annotations

import os

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.placement import ResolvedPlacement
from tests.helpers.loop_doubles import FakeGenerator, FakeStage, FakeTrainer, requests


def test_stream_events_tile_the_generation_without_gaps_for_the_consumer() -> None:
    worker = RolloutWorker("rollout", None, FakeGenerator, pin=False)
    out = list(worker.stream(requests(3, 2), micro_batch=4))
    assert [len(b) for b, _ in out] == [4, 2]
    events = [e for _, e in out]
    assert [e.batch for e in events] == [0, 1] and all(e.phase == "generate" for e in events)
    assert events[0].end <= events[1].start  # time suspended in yield is not counted
    assert [e.items for e in events] == [4, 2]


def test_events_carry_the_actor_its_cores_and_its_gpu_share() -> None:
    cores = tuple(sorted(os.sched_getaffinity(0)))
    placement = ResolvedPlacement(cores, threads=len(cores), gpu=0.25)
    worker = ScoringWorker("scorer-3", placement, FakeStage, pin=False)
    rollouts = FakeGenerator().generate(requests(1, 2))
    rewards, [event] = worker.score(rollouts, batch=7)
    assert rewards == {0: 5.0, 1: 12.0}  # FakeStage: reward = response length (5 + uid*7 % 11)
    assert (event.actor, event.phase, event.batch, event.cores, event.gpu, event.items) == (
        "scorer-3",
        "score",
        7,
        list(cores),
        0.25,
        2,
    )
    info = worker.ready()
    assert info["name"] == "scorer-3" and info["pid"] == os.getpid() and info["start_s"] >= 0


def test_weights_go_from_the_trainer_through_a_safetensors_folder_to_the_generator() -> None:
    gen = FakeGenerator()
    rollout = RolloutWorker("rollout", None, lambda: gen, pin=False)
    trainer = TrainerWorker("trainer", None, FakeTrainer, pin=False)
    state, export_event = trainer.export_weights()
    result, [event] = rollout.load_weights(state)
    assert result.method == "fake-reload" and "MiB" in result.detail
    assert export_event.phase == event.phase == "sync"
    assert len(gen.reloads) == 1 and (gen.reloads[0] / "model.safetensors").is_file()
    rollout.close()
    assert not gen.reloads[0].exists()  # the worker's weights folder is removed on close


def test_simulated_sync_blocks_for_its_cost() -> None:
    rollout = RolloutWorker("rollout", None, FakeGenerator, pin=False)
    result, [event] = rollout.simulate_sync(0.05, "test")
    assert result.method == "simulated" and result.detail == "test"
    assert event.duration >= 0.05
