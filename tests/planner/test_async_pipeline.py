"""The simulated async pipeline: cases worked out by hand, the bookkeeping every run must keep, and the
same stage times run through the loop's own ``AsyncPipeline`` on a virtual clock, event for event."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlsim.loop.schedules.asynchronous.pipeline import AsyncPipeline, AsyncSettings
from rlsim.planner.profile.schema import ContentionEntry
from rlsim.planner.sim.asynchronous.costs import SharedCores
from rlsim.planner.sim.asynchronous.pipeline import AsyncSimulation, PipelineRun, PipelineShape, union_of
from rlsim.planner.spec.placement import Resources
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Rollout, RolloutRequest


class Costs:
    """Stage costs from a table: ``gen[k]`` per batch (the last repeats), ``score`` per call, ``update``
    per update, ``sync`` per weight load; or random ones drawn once per call key (``seed``)."""

    def __init__(
        self,
        gen: Sequence[float] = (1.0,),
        score: float = 0.0,
        update: float = 1.0,
        sync: float = 0.0,
        seed: int | None = None,
        slow_groups: dict[int, float] | None = None,
    ) -> None:
        self.gen, self.score, self.update, self.sync = list(gen), score, update, sync
        self._rng = random.Random(seed) if seed is not None else None
        self._drawn: dict[object, float] = {}
        self.slow_groups = slow_groups or {}
        self.syncs = 0

    def _pick(self, key: object, fixed: float, low: float, high: float) -> float:
        if self._rng is None:
            return fixed
        if key not in self._drawn:
            self._drawn[key] = self._rng.uniform(low, high)
        return self._drawn[key]

    def generate_s(self, batch: int) -> float:
        return self._pick(("g", batch), self.gen[min(batch, len(self.gen) - 1)], 0.2, 3.0)

    def score_s(self, groups: Sequence[int]) -> float:
        slow = sum(self.slow_groups.get(g, 0.0) for g in groups)
        return slow + self._pick(("s", tuple(sorted(groups))), self.score, 0.01, 1.5)

    def update_s(self, groups: Sequence[int]) -> float:
        return self._pick(("u", tuple(sorted(groups))), self.update, 0.2, 3.0)

    def sync_s(self, groups: Sequence[int]) -> float:
        self.syncs += 1
        return self._pick(("y", self.syncs), self.sync, 0.0, 0.5)


def shape(pps: int = 2, g: int = 2, s: int = 1, steps: int = 4, micro: int = 4, scorers: int = 1, queue=None):
    return PipelineShape(pps, g, s, queue if queue is not None else (s + 1) * pps * g, steps, micro, scorers)


def check_books(run: PipelineRun) -> None:
    """What every run keeps: each rollout's one fate, whole groups, the bound, one batch per update."""
    t, sh = run.totals, run.shape
    assert t["generated"] == t["trained"] + t["dropped_stale"] + t["unfinished_at_end"]
    assert min(t.values()) >= 0
    assert t["trained"] == sh.steps * sh.batch
    trained = [g for groups in run.trained for g in groups]
    assert len(trained) == len(set(trained))  # no group trained twice
    assert all(len(groups) == sh.prompts_per_step for groups in run.trained)
    assert all(int(k) <= sh.max_staleness for k in run.histogram())
    assert sum(run.histogram().values()) == t["trained"]
    assert sum(run.dropped) <= t["dropped_stale"]  # drops after the last step are the run's too
    assert run.step_ends == sorted(run.step_ends)


def test_trainer_bound_by_hand() -> None:
    # gen 1 s, update 3 s, scoring and sync free. Batch 0: 0-1; update 0: 1-4 while batch 1 (v0) is
    # made 1-2; at 4 the sync, then update 1 on batch 1 (staleness 1) 4-7 while batch 2 (v1) is made
    # 4-5, ... Steps end at 4, 7, 10, 13: the update sets the pace, 4 rollouts per 3 s.
    run = AsyncSimulation(shape(), Costs(gen=[1.0], update=3.0)).run()
    assert run.step_ends == pytest.approx([4.0, 7.0, 10.0, 13.0])
    assert run.staleness == [{0: 4}, {1: 4}, {1: 4}, {1: 4}]
    assert run.rollouts_per_hour(first=1) == pytest.approx(12 * 3600 / 9.0)
    assert run.idle_fraction("trainer") == pytest.approx(1.0 / 13.0)  # only while batch 0 was made
    assert run.idle_fraction("rollout") == pytest.approx(1.0 - 4.0 / 13.0)  # batches 0-3 at 1 s each
    check_books(run)


def test_generation_bound_by_hand() -> None:
    # gen 3 s, update 1 s. Update 0: 3-4; its sync waits for batch 1 (3-6), so step 1 ends at 6; the
    # next steps end when the engine finishes a batch and loads the weights: 9, 12. The run needs 4
    # batches, so the engine is free when update 3 (12-13) is done: its weights load at once, at 13.
    run = AsyncSimulation(shape(), Costs(gen=[3.0], update=1.0)).run()
    assert run.step_ends == pytest.approx([6.0, 9.0, 12.0, 13.0])
    assert run.staleness == [{0: 4}, {1: 4}, {1: 4}, {1: 4}]
    assert run.idle_fraction("trainer") == pytest.approx(1.0 - 4 * 1.0 / 13.0)
    assert run.idle_fraction("rollout") == pytest.approx(1.0 / 13.0)  # waiting for the last update only
    check_books(run)


def test_partial_rollouts_load_the_weights_inside_the_generate_call_by_hand() -> None:
    # gen 3 s, update 1 s, sync 0.5 s. Update 0 (3-4) runs under batch 1 (3-6); its sync goes ahead of the
    # batch at 4: step 1 ends at 4.5 and batch 1 ends at 6.5, half a second late. Then update 1 (6.5-7.5)
    # under batch 2 (6.5-10 with the pause at 7.5), update 2 (10-11) under batch 3 (10-13.5), update 3
    # 13.5-14.5 with its sync at once: steps end at 4.5, 8, 11.5 and 15; each batch keeps the version it
    # started with. Without partial rollouts each sync waits for the batch under way: 6.5, 10, 13.5, 14.5.
    costs = Costs(gen=[3.0], update=1.0, sync=0.5)
    run = AsyncSimulation(dataclasses.replace(shape(), partial_rollouts=True), costs).run()
    assert run.step_ends == pytest.approx([4.5, 8.0, 11.5, 15.0])
    assert run.staleness == [{0: 4}, {1: 4}, {1: 4}, {1: 4}]
    assert run.idle_fraction("rollout") == pytest.approx(1.0 / 15.0)  # update 3 only
    check_books(run)
    whole = AsyncSimulation(shape(), Costs(gen=[3.0], update=1.0, sync=0.5)).run()
    assert whole.step_ends == pytest.approx([6.5, 10.0, 13.5, 14.5])


@settings(max_examples=60, deadline=None)
@given(
    gen=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    update=st.integers(1, 3),
    sync=st.sampled_from([0.0, 0.5, 1.0]),
    score=st.sampled_from([0.0, 1.0]),
    bound=st.integers(0, 2),
)
def test_partial_rollouts_keep_the_books_when_calls_end_together(
    gen: list[int], update: int, sync: float, score: float, bound: int
) -> None:
    """Whole-second costs make an update and a generate call end at the same instant: the update's sync goes
    ahead of a call that is finishing then, and every call still finishes once, in order."""
    sh = dataclasses.replace(shape(s=bound, steps=5), partial_rollouts=True)
    run = AsyncSimulation(sh, Costs(gen=[float(g) for g in gen], score=score, update=float(update), sync=sync)).run()
    check_books(run)
    assert len(run.step_ends) == 5
    syncs = [(b, e) for b, e, p in run.busy["rollout"] if p == "sync"]
    assert len(syncs) == 5 and all(e - b == pytest.approx(sync) for b, e in syncs)


def test_staleness_zero_runs_each_step_in_turn() -> None:
    # max_staleness 0: batch k waits for weights k, so a step is generate + score + update + sync in
    # turn, as the sequential schedule: 1 + 0.25 + 1 + 0.5 = 2.75 s, every rollout on-policy.
    run = AsyncSimulation(shape(s=0), Costs(gen=[1.0], score=0.25, update=1.0, sync=0.5)).run()
    assert run.step_ends == pytest.approx([2.75 * k for k in range(1, 5)])
    assert run.histogram() == {"0": 16}
    assert run.totals["unfinished_at_end"] == 0  # nothing runs ahead, so nothing is left over
    check_books(run)


def test_one_slow_scorer_call_makes_stale_groups_dropped_and_counted() -> None:
    # One group per scoring call, two replicas, round robin: every even group goes to replica 0, stuck
    # 20 s behind group 0. The trainer meanwhile takes the odd groups as they come, so the even groups
    # of early batches are two or more versions old when they arrive: dropped, and more batches made.
    costs = Costs(gen=[1.0], score=0.1, update=1.0, slow_groups={0: 20.0})
    run = AsyncSimulation(shape(micro=2, scorers=2, steps=5), costs).run()
    assert run.totals["dropped_stale"] > 0
    assert sum(run.dropped) > 0
    assert run.totals["generated"] > 5 * 4  # the dropped groups were made up for
    check_books(run)


def two_cores(units: float, shared: bool, train_on_scoring: bool = False) -> Resources:
    """One 2-core node: one engine and one scorer replica of ``units`` cores each (on the same cores
    when ``shared``), the trainer on the engine's cores or, ``train_on_scoring``, on the scorer's."""
    return Resources(
        nodes=1,
        gen_device="cpu",
        engines_per_node=1,
        engine_units=units,
        max_running=8,
        scorer_device="cpu",
        replicas_per_node=1,
        replica_units=units,
        scoring_units_per_node=units,
        shared=shared,
        gpus_per_node=0,
        cores_per_node=2,
        train_on_scoring=train_on_scoring,
    )


def test_shared_cores_slow_the_engine_while_the_trainer_runs() -> None:
    # Colocated, gen_slowdown 1 (half speed while another stage runs), score_slowdown 0. Batch 1 runs
    # beside update 0 (1-4): 1 s of work at half speed takes 2 s (1-3), then the update alone.
    res = two_cores(units=2.0, shared=True)
    speeds = SharedCores(res, ContentionEntry(gen_slowdown=1.0, score_slowdown=0.0))
    run = AsyncSimulation(shape(), Costs(gen=[1.0], update=3.0), speeds).run()
    gen_calls = [(b, e) for b, e, p in run.busy["rollout"] if p == "generate"]
    assert gen_calls[:2] == [pytest.approx((0.0, 1.0)), pytest.approx((1.0, 3.0))]
    assert run.step_ends[0] == pytest.approx(4.0)  # the trainer itself is not slowed (score_slowdown 0)


def _split(efficiency: float | None) -> SharedCores:
    """Split placement: the engine on core 0, one scorer replica and the trainer on core 1."""
    res = two_cores(units=1.0, shared=False, train_on_scoring=True)
    return SharedCores(res, ContentionEntry(gen_slowdown=1.0, score_slowdown=3.0), efficiency)


def test_the_trainer_shares_the_scorers_core_as_the_measured_efficiency_says() -> None:
    speeds = _split(0.8)
    # Two 1-thread processes on one core: half the core each, less what the sharing loses.
    assert speeds({"trainer": "update", "scorer-0": "score"}) == pytest.approx({"trainer": 0.4, "scorer-0": 0.4})
    assert speeds({"trainer": "update", "rollout": "generate"}) == {"trainer": 1.0, "rollout": 1.0}  # other cores
    assert speeds({"scorer-0": "score"}) == {"scorer-0": 1.0}
    assert "sharing_efficiency 0.80" in speeds.assumption()
    # Two such nodes (a data-parallel trainer over both): each node's core holds one scorer and a trainer share.
    two = dataclasses.replace(two_cores(units=1.0, shared=False, train_on_scoring=True), nodes=2)
    both = SharedCores(two, ContentionEntry(gen_slowdown=1.0, score_slowdown=3.0), 0.8)
    busy = {"trainer": "update", "scorer-0": "score", "scorer-1": "score"}
    assert both(busy) == pytest.approx({"trainer": 0.4, "scorer-0": 0.4, "scorer-1": 0.4})
    # Without a roles section: the older assumption, the trainer meets the scorer like the engine does.
    old = _split(None)
    assert old({"trainer": "update", "scorer-0": "score"}) == pytest.approx({"trainer": 0.25, "scorer-0": 0.25})
    assert "like a scorer (score_slowdown)" in old.assumption()


def test_union_of_counts_overlaps_once() -> None:
    assert union_of([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == pytest.approx(4.0)
    assert union_of([]) == 0.0


# ---- the loop's own AsyncPipeline on a virtual clock ------------------------------------------------
class VirtualBackend:
    """The calls of the loop's ``Backend`` the async pipeline makes, run by workers in order on a virtual clock,
    each taking what ``costs`` says; ``wait`` moves the clock to the next end and returns every call ending
    then."""

    def __init__(self, costs: Costs, pps: int, scorers: int) -> None:
        self.costs, self.pps, self.num_scorers = costs, pps, scorers
        self.now = 0.0
        self._free: dict[str, float] = {}
        self._ends: dict[int, tuple[float, object]] = {}
        self._next = 0

    def _call(self, worker: str, seconds: float, result: object) -> int:
        start = max(self.now, self._free.get(worker, 0.0))
        self._free[worker] = start + seconds
        self._next += 1
        self._ends[self._next] = (start + seconds, result)
        return self._next

    def start_pipeline(self, partial: bool) -> None:
        pass

    def submit_generate(self, requests: Sequence[RolloutRequest], version: int | None = None) -> int:
        rollouts = [Rollout(r.uid, r.group, [1], [7] * r.response_tokens) for r in requests]
        return self._call("rollout", self.costs.generate_s(requests[0].group // self.pps), (rollouts, []))

    def submit_score(self, replica: int, rollouts: list[Rollout], batch: int) -> int:
        groups = sorted({r.group for r in rollouts})
        return self._call(f"scorer-{replica}", self.costs.score_s(groups), ({r.uid: 0.0 for r in rollouts}, []))

    def submit_train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> int:
        groups = sorted({r.group for r in rollouts})
        return self._call("trainer", self.costs.update_s(groups), ({"sequences": len(rollouts)}, []))

    def submit_sync(self, version: int) -> int:
        return self._call("rollout", self.costs.sync_s([]), (SyncResult("virtual", 0.0), []))

    def wait(self, handles: list[int], timeout: float | None) -> list[int]:
        first = min(self._ends[h][0] for h in handles)
        self.now = max(self.now, first)
        return [h for h in handles if self._ends[h][0] <= first + 1e-12]

    def result(self, handle: int) -> object:
        return self._ends.pop(handle)[1]


def loop_run(sh: PipelineShape, costs: Costs) -> tuple[list[float], list[dict[int, int]], dict[str, int]]:
    backend = VirtualBackend(costs, sh.prompts_per_step, sh.scorers)
    settings = AsyncSettings(
        sh.prompts_per_step, sh.group_size, sh.max_staleness, sh.queue_size, sh.steps, sh.micro_batch
    )
    g = sh.group_size
    reqs = [RolloutRequest(p * g + s, p, "p", 3) for p in range(sh.prompts_per_step) for s in range(g)]
    pipeline = AsyncPipeline(backend, settings, lambda k: reqs, clock=lambda: backend.now)
    outcomes = [pipeline.next_step() for _ in range(sh.steps)]
    staleness = [{int(k): v for k, v in o.staleness.items()} for o in outcomes]
    return [o.end for o in outcomes], staleness, pipeline.ledger.totals()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    pps=st.integers(1, 3),
    group=st.integers(1, 3),
    bound=st.integers(0, 2),
    scorers=st.integers(1, 3),
    per_call=st.integers(1, 3),
    extra_queue=st.integers(0, 2),
)
def test_the_simulation_matches_the_loops_scheduler_event_for_event(
    seed: int, pps: int, group: int, bound: int, scorers: int, per_call: int, extra_queue: int
) -> None:
    sh = PipelineShape(pps, group, bound, (bound + 1 + extra_queue) * pps * group, 5, per_call * group, scorers)
    ends, staleness, totals = loop_run(sh, Costs(seed=seed))
    run = AsyncSimulation(sh, Costs(seed=seed)).run()
    assert run.step_ends == pytest.approx(ends, abs=1e-9)
    assert run.staleness == staleness
    assert run.totals == totals
    check_books(run)


def test_the_dropping_case_matches_the_loop_too() -> None:
    sh = shape(micro=2, scorers=2, steps=5)
    make = lambda: Costs(gen=[1.0], score=0.1, update=1.0, slow_groups={0: 20.0})  # noqa: E731
    ends, staleness, totals = loop_run(sh, make())
    run = AsyncSimulation(sh, make()).run()
    assert totals["dropped_stale"] > 0
    assert (run.step_ends, run.staleness, run.totals) == (pytest.approx(ends), staleness, totals)


class WholeSeconds(Costs):
    """Costs of 1, 2 or 3 s drawn once per call key: many calls end at the same instant, where the routing of
    the next scoring calls depends on handling them in the order they were sent."""

    def _pick(self, key: object, fixed: float, low: float, high: float) -> float:
        assert self._rng is not None
        return self._drawn.setdefault(key, float(self._rng.randint(1, 3)))


@pytest.mark.parametrize("seed", range(12))
def test_routing_matches_the_loop_when_calls_end_together(seed: int) -> None:
    """Scoring calls go to the replica with the fewest outstanding in both; ties at one instant included."""
    sh = PipelineShape(3, 2, seed % 3, (seed % 3 + 2) * 6, 5, 2 * (1 + seed % 2), 2 + seed % 2)
    ends, staleness, totals = loop_run(sh, WholeSeconds(seed=seed))
    run = AsyncSimulation(sh, WholeSeconds(seed=seed)).run()
    assert run.step_ends == pytest.approx(ends, abs=1e-9)
    assert (run.staleness, run.totals) == (staleness, totals)
