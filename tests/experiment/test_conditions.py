"""Condition figures from recorded timelines (hand-worked), and the four conditions on in-process doubles."""

from __future__ import annotations

import pytest

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.experiment.accounting import Snapshot, pool_time
from rlsim.experiment.conditions import ConditionRunner, Workload, timebox_counts, together_figures
from rlsim.loop.backends.local import InProcessBackend
from rlsim.loop.sync import WeightSync
from rlsim.rollout.types import Event, Rollout
from rlsim.workloads import FixedLengths, WorkloadSpec
from tests.helpers.loop_doubles import FakeGenerator, FakeStage, FakeTrainer


def ev(phase: str, start: float, end: float, items: int = 0, actor: str | None = None) -> Event:
    return Event(actor or {"score": "scorer-x-0"}.get(phase, phase), phase, 0, start, end, [0, 1], 0.0, items)


def test_together_figures_on_a_recorded_step() -> None:
    # generate [0,4] and [4,6]; score [3,5] and [6,7.5]; update [7.5,9]; sync [9,9.5]; step [0,10].
    events = [
        ev("generate", 0, 4),
        ev("generate", 4, 6),
        ev("score", 3, 5),
        ev("score", 6, 7.5),
        ev("update", 7.5, 9),
        ev("sync", 9, 9.5),
    ]
    rollouts = [Rollout(0, 0, [1], [7] * 10), Rollout(1, 0, [1], [7] * 20)]
    f = together_figures(events, 0.0, 10.0, rollouts)
    phases = (f["step_s"], f["generate_s"], f["score_s"], f["update_s"], f["sync_s"])
    assert phases == pytest.approx((10, 6, 3.5, 1.5, 0.5))
    assert f["idle_s"] == pytest.approx(0.5)  # [9.5, 10] is covered by nothing
    # scoring alone on the path: |score U generate| - |generate| = 7.5 - 6 = 1.5 s, 15 % of the step
    assert f["score_exposed_s"] == pytest.approx(1.5) and f["score_critical_share"] == pytest.approx(0.15)
    assert f["gen_tokens_per_s"] == pytest.approx(30 / 6)  # 30 response tokens in 6 s of generation
    assert f["score_rollouts_per_s"] == pytest.approx(2 / 3.5)  # 2 rollouts in 3.5 busy seconds
    assert f["score_gpu_s"] == 0.0


def test_timebox_counts_only_what_finished_by_the_deadline() -> None:
    gen = [ev("generate", 0, e, 4) for e in (1, 2, 3.5, 5)]
    score = [ev("score", 0, e, 4) for e in (1.5, 2.5, 4.5)]
    f = timebox_counts(gen, score, deadline=4.0, budget_s=4.0)
    # generated: batches ending at 1, 2, 3.5 -> 12; scored: ending at 1.5, 2.5 -> 8; per hour: 8 x 3600 / 4
    assert (f["generated_in_budget"], f["scored_in_budget"]) == (12, 8)
    assert f["rollouts_per_hour"] == pytest.approx(7200.0)


class CountingAccountant:
    """Snapshots whose one process (pid 7, the rollout actor) gains 0.5 s and pid 8 (the scorer)
    0.25 s per snapshot, so every condition's pool time is known."""

    def __init__(self) -> None:
        self.n = 0

    def snapshot(self) -> Snapshot:
        self.n += 1
        return Snapshot(float(self.n), {7: (1, 0.5 * self.n, 0.0), 8: (1, 0.25 * self.n, 0.0)}, 0.0, 0.0)

    def between(self, before: Snapshot, after: Snapshot, roots):
        return pool_time(before, after, {"generate": [7], "score": [8], "update": []}, driver=1, cores=2)


@pytest.fixture
def runner() -> ConditionRunner:
    backend = InProcessBackend(
        RolloutWorker("rollout", None, FakeGenerator, pin=False),
        [ScoringWorker("scorer-fake-0", None, FakeStage, pin=False)],
        TrainerWorker("trainer", None, FakeTrainer, pin=False),
        WeightSync("simulated", 0.0),
    )
    spec = WorkloadSpec(prompt=FixedLengths(tokens=4), response=FixedLengths(tokens=6))
    work = Workload(spec, prompts=3, group=2, micro_batch=2, timebox_micro_batch=2, budget_s=0.05)
    return ConditionRunner(backend, CountingAccountant(), {}, work, "fake", repeat=0)


def test_conditions_on_in_process_doubles(runner: ConditionRunner) -> None:
    gen = runner.run("gen_alone", 1)
    assert gen.figures["rollouts"] == 6 and gen.figures["gen_tokens"] == 36  # 3 prompts x 2, 6 tokens each
    # 0.5 generate core-s per snapshot step over 6 rollouts
    assert gen.figures["gen_core_s_per_rollout"] == pytest.approx(0.5 / 6)
    score = runner.run("score_alone", 1)
    assert score.figures["rollouts"] == 6 and score.figures["score_core_s"] == pytest.approx(0.25)
    together = runner.run("together", 1)
    assert together.figures["rollouts"] == 6 and together.figures["gen_tokens"] == 36
    boxed = runner.run("timeboxed", 1)
    assert 0 < boxed.figures["scored_in_budget"] <= boxed.figures["generated_in_budget"]
    assert boxed.extra["waves"] >= 1
    assert together.as_dict()["pool"]["core_s"]["generate"] == pytest.approx(0.5)


def test_every_measured_event_becomes_a_valid_trace_span(runner: ConditionRunner) -> None:
    from rlsim.metrics.trace import experiment_trace, validate_trace

    runner.run("gen_alone", 1)
    runner.run("score_alone", 1)
    runner.run("together", 1)
    conditions = {s["args"]["condition"] for s in runner.spans}
    assert conditions == {"gen_alone", "score_alone", "together"}
    assert {s["track"] for s in runner.spans} >= {"rollout", "scorer-fake-0"}
    doc = experiment_trace(runner.spans)
    assert validate_trace(doc) == []
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(runner.spans) and min(e["ts"] for e in spans) == 0


def test_score_alone_needs_the_rollouts_of_gen_alone(runner: ConditionRunner) -> None:
    with pytest.raises(RuntimeError, match="gen_alone"):
        runner.run("score_alone", 1)


class CoolingAccountant:
    """The rollout actor (pid 7) keeps one core busy for the first ``busy_snapshots`` snapshots,
    then stops: settle must wait past them and no longer."""

    def __init__(self, busy_snapshots: int) -> None:
        self.n, self.busy_snapshots, self.cpu = 0, busy_snapshots, 0.0

    def snapshot(self) -> Snapshot:
        self.n += 1
        if self.n <= self.busy_snapshots:
            self.cpu += 0.25  # one core over the 0.25 s window between snapshots
        return Snapshot(0.25 * self.n, {7: (1, self.cpu, 0.0)}, 0.0, 0.0)

    def between(self, before: Snapshot, after: Snapshot, roots):
        return pool_time(before, after, {"generate": [7]}, driver=1, cores=2)


def _settle(accountant, settle_max_s: float) -> dict:
    runner = ConditionRunner(None, accountant, {"generate": [7]}, None, "x", 0, settle_max_s)  # type: ignore[arg-type]
    return runner.settle()


def test_settle_waits_until_the_actors_are_idle() -> None:
    accountant = CoolingAccountant(busy_snapshots=3)
    result = _settle(accountant, settle_max_s=10.0)
    # windows 1-2 and 2-3 are busy, 3-4 is the first idle one: four snapshots, three windows waited
    assert result["settled"] is True and accountant.n == 4
    assert 0.7 <= result["settle_s"] < 3.0


def test_settle_gives_up_at_its_cap_and_says_so() -> None:
    result = _settle(CoolingAccountant(busy_snapshots=1000), settle_max_s=0.5)
    assert result["settled"] is False and 0.5 <= result["settle_s"] < 2.0


def test_settle_is_off_at_zero() -> None:
    accountant = CoolingAccountant(busy_snapshots=1000)
    assert _settle(accountant, settle_max_s=0.0) == {} and accountant.n == 0
