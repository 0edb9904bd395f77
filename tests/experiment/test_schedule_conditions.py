"""The together condition with PPO's roles and under the async schedule, on in-process doubles.

The doubles are the loop's own (tests/helpers/loop_doubles.py) inside the real workers; the accountant hands
out known CPU seconds per process, so every core-second figure is worked out by hand.
"""

from __future__ import annotations

from functools import partial

import pytest

from rlsim.actors.role_workers import CriticWorker, ReferenceWorker
from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.experiment.accounting import Snapshot, pool_time
from rlsim.experiment.asynchronous.condition import AsyncTogether
from rlsim.experiment.conditions import ConditionRunner, OverlappedTogether, Workload
from rlsim.loop.backends.local import InProcessBackend
from rlsim.loop.schedules.asynchronous.pipeline import AsyncSettings
from rlsim.loop.sync import WeightSync
from rlsim.workloads import FixedLengths, WorkloadSpec
from tests.helpers.loop_doubles import FakeCritic, FakeGenerator, FakePpoTrainer, FakeReference, FakeStage, FakeTrainer

# pid -> CPU seconds it gains per snapshot: rollout 7, scorer 8, trainer 9, reference 10, critic 11
GAIN = {7: 0.5, 8: 0.25, 9: 0.2, 10: 0.1, 11: 0.3}
ROOTS = {"generate": [7], "score": [8], "update": [9], "reference": [10], "critic": [11]}


class KnownAccountant:
    """Every snapshot adds ``GAIN`` to each process, so one measured condition (two snapshots) shows
    exactly ``GAIN`` per group."""

    def __init__(self) -> None:
        self.n = 0

    def snapshot(self) -> Snapshot:
        self.n += 1
        return Snapshot(float(self.n), {pid: (1, g * self.n, 0.0) for pid, g in GAIN.items()}, 0.0, 0.0)

    def between(self, before: Snapshot, after: Snapshot, roots):  # type: ignore[no-untyped-def]
        return pool_time(before, after, roots, driver=1, cores=2)


def work(micro_batch: int = 2) -> Workload:
    spec = WorkloadSpec(prompt=FixedLengths(tokens=4), response=FixedLengths(tokens=6))
    return Workload(spec, prompts=3, group=2, micro_batch=micro_batch, timebox_micro_batch=2, budget_s=0.05)


def test_the_ppo_together_step_runs_every_role_and_measures_each_ones_core_seconds() -> None:
    backend = InProcessBackend(
        RolloutWorker("rollout", None, FakeGenerator, pin=False),
        [ScoringWorker("scorer-fake-0", None, FakeStage, pin=False)],
        TrainerWorker("trainer", None, partial(FakePpoTrainer, "ppo", 0.1), pin=False),
        WeightSync("simulated", 0.0),
        ReferenceWorker("reference", None, FakeReference, pin=False),
        CriticWorker("critic", None, FakeCritic, pin=False),
    )
    w = work()
    runner = ConditionRunner(
        backend, KnownAccountant(), ROOTS, w, "fake", 0, together=OverlappedTogether(backend, w, experience=True)
    )
    m = runner.run("together", 1)
    f = m.figures
    assert f["rollouts"] == 6 and f["gen_tokens"] == 36
    # The PPO step's own phases are in the figures, and the update covers every part of it.
    assert {"reference_s", "values_s", "advantages_s", "update_actor_s", "update_critic_s"} <= set(f)
    assert {s["name"] for s in runner.spans} >= {"reference", "values", "update_critic", "score", "generate"}
    core = (f["generate_core_s"], f["score_core_s"], f["update_core_s"], f["reference_core_s"], f["critic_core_s"])
    assert core == pytest.approx((0.5, 0.25, 0.2, 0.1, 0.3))
    assert m.as_dict()["pool"]["core_s"]["critic"] == pytest.approx(0.3)


def test_a_grpo_row_keeps_its_three_core_groups() -> None:
    backend = InProcessBackend(
        RolloutWorker("rollout", None, FakeGenerator, pin=False),
        [ScoringWorker("scorer-fake-0", None, FakeStage, pin=False)],
        TrainerWorker("trainer", None, FakeTrainer, pin=False),
        WeightSync("simulated", 0.0),
    )
    roots = {k: v for k, v in ROOTS.items() if k not in ("reference", "critic")}
    m = ConditionRunner(backend, KnownAccountant(), roots, work(), "fake", 0).run("together", 1)
    assert not any(k.startswith(("reference", "critic", "values")) for k in m.figures)
    assert m.figures["generate_core_s"] == pytest.approx(0.5)


def test_the_async_together_run_trains_every_update_and_reports_per_update() -> None:
    backend = InProcessBackend(
        RolloutWorker("rollout", None, FakeGenerator, pin=False),
        [ScoringWorker("scorer-fake-0", None, FakeStage, pin=False)],
        TrainerWorker("trainer", None, FakeTrainer, pin=False),
        WeightSync("simulated", 0.0),
        threaded=True,
    )
    w = work()
    updates = 3
    settings = AsyncSettings(w.prompts, w.group, 1, 2 * w.prompts * w.group, steps=updates, micro_batch=2, stall_s=30)
    roots = {k: v for k, v in ROOTS.items() if k not in ("reference", "critic")}
    runner = ConditionRunner(
        None,  # type: ignore[arg-type]  (the async run has its own backend; no other condition runs here)
        KnownAccountant(),
        roots,
        w,
        "fake",
        0,
        together=AsyncTogether(backend, w, settings),
    )
    try:
        m = runner.run("together", 1)
    finally:
        backend.close()
    f = m.figures
    assert m.extra["updates"] == updates and m.as_dict()["updates"] == updates
    assert f["rollouts"] == updates * 6  # every update trains one batch of 3 prompts x 2
    # max_staleness 1: the first batch is on-policy, later ones at most one version old
    assert 0.0 <= f["mean_staleness"] <= 1.0 and f["dropped_stale"] == 0
    assert f["step_s"] == pytest.approx(f["wall_s"] / updates)
    # wall_s is stored to 4 decimals, and this run lasts milliseconds: compare within that rounding
    per_hour = updates * 6 / f["wall_s"] * 3600
    assert f["rollouts_trained_per_hour"] == pytest.approx(per_hour, rel=1e-4 / f["wall_s"] + 1e-6)
    assert 0.0 <= f["trainer_idle_fraction"] < 1.0 and 0.0 <= f["rollout_idle_fraction"] < 1.0
    # Every generated rollout counts for generation throughput (6 tokens each), trained or not.
    assert f["gen_tokens"] >= updates * 6 * 6
    # Core-seconds per update: the pool's (0.5 for the rollout process) divided by the updates.
    assert f["generate_core_s"] == pytest.approx(0.5 / updates) and f["score_core_s"] == pytest.approx(0.25 / updates)
    assert {s["args"]["condition"] for s in runner.spans} == {"together"}
