"""The async schedule in-process, on real threads, with test doubles whose stage times are drawn at random.

The doubles keep their own truth, independent of the pipeline's bookkeeping: the generator counts the
weight loads it received (its engine version) and tags each rollout with it; the trainer counts its
updates and records which rollouts each update used. From those the test checks the schedule's promises.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Sequence
from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.errors import RlsimError
from rlsim.loop.backends.local import InProcessBackend
from rlsim.loop.outputs.records import union_length
from rlsim.loop.schedules.asynchronous.pipeline import AsyncPipeline, AsyncSettings
from rlsim.loop.sync import WeightSync
from rlsim.rollout.types import Rollout, RolloutRequest
from tests.helpers.loop_doubles import DroppingStage, FakeGenerator, FakeStage, FakeTrainer, requests


class TimedGenerator(FakeGenerator):
    def __init__(self, delays: Sequence[float]) -> None:
        super().__init__()
        self._delays = itertools.cycle(delays)
        self.engine_version = 0
        self.made: dict[int, int] = {}  # uid -> engine version that generated it

    def generate(self, reqs: Sequence[RolloutRequest]) -> list[Rollout]:
        time.sleep(next(self._delays))
        out = super().generate(reqs)
        self.made.update((r.uid, self.engine_version) for r in out)
        return out

    def load_weights(self, weights_dir):  # type: ignore[no-untyped-def]
        result = super().load_weights(weights_dir)
        self.engine_version += 1
        return result


class TimedStage(FakeStage):
    def __init__(self, delays: Sequence[float]) -> None:
        super().__init__()
        self._delays = itertools.cycle(delays)

    def score(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        time.sleep(next(self._delays))
        return super().score(rollouts)


class TimedTrainer(FakeTrainer):
    def __init__(self, delays: Sequence[float]) -> None:
        super().__init__()
        self._delays = itertools.cycle(delays)

    def train_step(self, rollouts, rewards):  # type: ignore[no-untyped-def]
        time.sleep(next(self._delays))
        return super().train_step(rollouts, rewards)


class SteppingGenerator(TimedGenerator):
    """An engine that samples one token per request per step (``step_s`` each) and, given a swap point,
    takes new weights between steps. Its own truth: the engine version (weight loads so far) that sampled
    each token of each rollout, in ``token_versions``."""

    def __init__(self, step_s: Sequence[float]) -> None:
        super().__init__([0.0])
        self._steps = itertools.cycle(step_s)
        self.token_versions: dict[int, list[int]] = {}
        self.swaps = 0

    def generate(self, reqs: Sequence[RolloutRequest], swap=None) -> list[Rollout]:  # type: ignore[no-untyped-def, override]
        sampled: dict[int, list[int]] = {r.uid: [] for r in reqs}
        spans: dict[int, list[tuple[int, int]]] = {r.uid: [] for r in reqs}
        left = list(reqs)
        while left:
            offered = swap.pending() if swap is not None else None
            if offered is not None:
                t0 = time.time()
                swap.swapped(self.load_weights(offered[0]), t0, time.time())
                self.swaps += 1
                for r in left:
                    spans[r.uid].append((offered[1], len(sampled[r.uid])))
            time.sleep(next(self._steps))
            for r in left:
                sampled[r.uid].append(self.engine_version)
            left = [r for r in left if len(sampled[r.uid]) < r.response_tokens]
        out = [self._make(r) for r in reqs]
        for r in out:
            self.made[r.uid] = sampled[r.uid][0]
            self.token_versions[r.uid] = sampled[r.uid]
            r.version_spans = spans[r.uid] if swap is not None else None
        return out


def run(
    gen: TimedGenerator, stages: list[FakeStage], trainer: FakeTrainer, s: AsyncSettings
) -> tuple[AsyncPipeline, list]:
    backend = InProcessBackend(
        RolloutWorker("rollout", None, lambda: gen, pin=False),
        [ScoringWorker(f"scorer-{i}", None, partial(lambda x: x, st_), pin=False) for i, st_ in enumerate(stages)],
        TrainerWorker("trainer", None, lambda: trainer, pin=False),
        WeightSync("reload", 0.0),
        threaded=True,
    )
    pipeline = AsyncPipeline(backend, s, lambda k: requests(s.prompts_per_step, s.group_size))
    try:
        outcomes = [pipeline.next_step() for _ in range(s.steps)]
    finally:
        backend.close()
    return pipeline, outcomes


delays = st.lists(st.floats(0.0, 0.004), min_size=1, max_size=4)
# The pipeline's shape, drawn alike for the schedule with and without partial rollouts.
SHAPES = dict(prompts=st.integers(1, 3), group=st.integers(2, 3), staleness=st.integers(0, 2), steps=st.integers(1, 4))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **SHAPES,
    extra=st.integers(0, 2),
    scorers=st.integers(1, 2),
    micro=st.integers(1, 6),
    gen_d=delays,
    score_d=delays,
    train_d=delays,
)
def test_no_stale_training_every_rollout_one_fate_groups_whole(
    prompts: int,
    group: int,
    staleness: int,
    extra: int,
    steps: int,
    scorers: int,
    micro: int,
    gen_d: list[float],
    score_d: list[float],
    train_d: list[float],
) -> None:
    s = AsyncSettings(prompts, group, staleness, (staleness + 1 + extra) * prompts * group, steps, micro, stall_s=30)
    gen, trainer = TimedGenerator(gen_d), TimedTrainer(train_d)
    pipeline, outcomes = run(gen, [TimedStage(score_d) for _ in range(scorers)], trainer, s)

    assert len(trainer.seen) == steps and [o.version for o in outcomes] == list(range(1, steps + 1))
    trained: list[int] = []
    for update, (uids, _) in enumerate(trainer.seen):  # update = versions the trainer had made before it
        assert len(uids) == prompts * group
        assert all(update - gen.made[u] <= staleness for u in uids), "a rollout older than the bound was trained"
        assert set(Counter(u // group for u in uids).values()) == {group}, "a group was split"
        trained += uids
    assert len(trained) == len(set(trained)), "a rollout was trained twice"
    totals = pipeline.ledger.totals()
    assert totals["generated"] == len(gen.made)
    assert totals["trained"] == len(trained) == steps * prompts * group
    assert set(trained).isdisjoint(pipeline.ledger.dropped)
    assert totals["generated"] == totals["trained"] + totals["dropped_stale"] + totals["unfinished_at_end"]
    true_staleness = Counter(str(update - gen.made[u]) for update, (uids, _) in enumerate(trainer.seen) for u in uids)
    assert pipeline.ledger.histogram() == dict(sorted(true_staleness.items()))
    assert sum(sum(o.staleness.values()) for o in outcomes) == len(trained)
    assert gen.engine_version == steps  # one weight load per update, none lost


def overlap(events: list, a: str, b: str) -> float:
    """Seconds during which some ``a`` event and some ``b`` event ran at once."""
    spans_a = [(e.start, e.end) for e in events if e.phase == a]
    spans_b = [(e.start, e.end) for e in events if e.phase == b]
    both = [(max(x[0], y[0]), min(x[1], y[1])) for x in spans_a for y in spans_b]
    return union_length(both)


@pytest.mark.parametrize("staleness", [0, 1])
def test_one_step_off_policy_generates_the_next_batch_while_the_update_runs(staleness: int) -> None:
    s = AsyncSettings(2, 2, staleness, (staleness + 1) * 4, steps=3, micro_batch=4)
    pipeline, outcomes = run(TimedGenerator([0.05]), [TimedStage([0.0])], TimedTrainer([0.1]), s)
    shared = overlap(pipeline.events, "generate", "update")
    if staleness == 0:  # on-policy: the next batch needs the weights of this update
        assert shared == 0.0
        assert pipeline.ledger.histogram() == {"0": 12}
    else:  # generation of step k+1 (50 ms) fits inside update k (100 ms), twice in three steps
        assert shared > 0.08
        assert pipeline.ledger.histogram() == {"0": 4, "1": 8}
    assert pipeline.ledger.totals() == {"generated": 12, "trained": 12, "dropped_stale": 0, "unfinished_at_end": 0}


class StuckGroupStage(FakeStage):
    """Scores the first call holding ``group`` after ``delay_s``; every other call at once."""

    def __init__(self, group: int, delay_s: float) -> None:
        super().__init__()
        self.group, self.delay_s = group, delay_s

    def score(self, rollouts: Sequence[Rollout]) -> dict[int, float]:
        if any(r.group == self.group for r in rollouts):
            time.sleep(self.delay_s)
        return super().score(rollouts)


def test_a_group_held_up_past_the_bound_is_dropped_counted_and_never_trained() -> None:
    # 3 groups of 2 per batch, one group per scoring call over 3 replicas, each to the one with the fewest
    # calls outstanding: scorer-1 holds group 1 for 0.5 s, so batch 2's groups 3 and 4 go to the free
    # replicas and group 5 (ties on outstanding, scorer-1 then has sent the fewest) queues behind group 1.
    # The trainer fills two batches from the other groups meanwhile (versions 0 and 1), so at version 2
    # groups 1 and 5 (version 0) are two behind; later groups find scorer-1 busy and go elsewhere.
    s = AsyncSettings(3, 2, max_staleness=1, queue_size=18, steps=4, micro_batch=2)
    stages = [FakeStage(), StuckGroupStage(1, 0.5), FakeStage()]
    gen, trainer = TimedGenerator([0.01]), TimedTrainer([0.01])
    pipeline, outcomes = run(gen, stages, trainer, s)
    totals = pipeline.ledger.totals()
    assert pipeline.ledger.dropped == {2, 3, 10, 11}  # groups 1 and 5: uids 2g and 2g + 1
    assert totals["dropped_stale"] == sum(o.dropped_stale for o in outcomes) >= 4
    assert totals["generated"] == totals["trained"] + totals["dropped_stale"] + totals["unfinished_at_end"]
    trained = [u for uids, _ in trainer.seen for u in uids]
    assert pipeline.ledger.dropped.isdisjoint(trained) and len(trained) == 4 * 6
    assert all(update - gen.made[u] <= 1 for update, (uids, _) in enumerate(trainer.seen) for u in uids)


def test_a_group_with_a_dropped_reward_is_replaced_counted_and_never_trained() -> None:
    s = AsyncSettings(2, 2, max_staleness=1, queue_size=8, steps=3, micro_batch=2)
    gen, trainer = TimedGenerator([0.01]), TimedTrainer([0.01])
    pipeline, outcomes = run(gen, [DroppingStage({1, 5})], trainer, s)  # uids 1 and 5: groups 0 and 2
    totals = pipeline.ledger.totals()
    assert pipeline.ledger.reward_dropped == {0, 1, 4, 5} and totals["dropped_reward"] == 4
    trained = [u for uids, _ in trainer.seen for u in uids]
    assert len(trained) == 3 * 4 and pipeline.ledger.reward_dropped.isdisjoint(trained)  # replaced, not short
    assert totals["generated"] == totals["trained"] + totals["dropped_stale"] + 4 + totals["unfinished_at_end"]
    assert sum(o.dropped_stale for o in outcomes) == totals["dropped_stale"]


def spans_of(token_versions: list[int]) -> list[tuple[int, int]]:
    """(version, first token) of each run of equal versions: what a rollout's ``versions`` must say."""
    return [(v, i) for i, v in enumerate(token_versions) if i == 0 or token_versions[i - 1] != v]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **SHAPES,
    step_d=st.lists(st.floats(0.0, 0.0015), min_size=1, max_size=3),
    score_d=delays,
    train_d=delays,
)
def test_partial_rollouts_record_every_version_and_keep_the_bound_on_the_oldest(
    prompts: int, group: int, staleness: int, steps: int, step_d: list, score_d: list, train_d: list
) -> None:
    """With partial rollouts the weights reach the engine between its steps: each trained rollout's
    versions are exactly the engine's own record of who sampled each token, no token of a trained rollout
    is older than the bound allows, and the promises of the schedule without partial rollouts still hold."""
    s = AsyncSettings(prompts, group, staleness, (staleness + 1) * prompts * group, steps, 4, 30, partial_rollouts=True)
    gen, trainer = SteppingGenerator(step_d), TimedTrainer(train_d)
    pipeline, outcomes = run(gen, [TimedStage(score_d)], trainer, s)

    trained = [u for uids, _ in trainer.seen for u in uids]
    assert len(trained) == len(set(trained)) == steps * prompts * group
    rollouts = {r.uid: r for o in outcomes for r in o.rollouts}
    for update, (uids, _) in enumerate(trainer.seen):
        assert set(Counter(u // group for u in uids).values()) == {group}, "a group was split"
        for u in uids:
            assert rollouts[u].version_spans == spans_of(gen.token_versions[u])
            assert update - min(gen.token_versions[u]) <= staleness, "a token older than the bound was trained"
            assert pipeline.ledger.versions[u] == min(gen.token_versions[u])
    totals = pipeline.ledger.totals()
    assert totals["generated"] == totals["trained"] + totals["dropped_stale"] + totals["unfinished_at_end"]
    assert gen.engine_version == steps  # one weight load per update, mid-generation or between calls
    assert sum(1 for e in pipeline.events if e.actor == "rollout" and e.phase == "sync") == steps


def test_a_weight_swap_lands_inside_a_long_generation() -> None:
    """Generation (a token per 10 ms, 5-15 tokens) is slower than the update (20 ms): with partial rollouts
    the second batch's requests take version 1 part-way, and the generate call's events break around the
    pause."""
    s = AsyncSettings(2, 2, 1, 8, steps=2, micro_batch=4, partial_rollouts=True)
    gen = SteppingGenerator([0.01])
    pipeline, outcomes = run(gen, [TimedStage([0.0])], TimedTrainer([0.02]), s)
    assert gen.swaps >= 1
    spanning = [r for o in outcomes for r in o.rollouts if len(r.version_spans or []) > 1]
    assert spanning and all([v for v, _ in r.version_spans] == [0, 1] for r in spanning)
    assert all(r.behaviour_logprobs is None or len(r.behaviour_logprobs) == len(r.response_ids) for r in spanning)
    pause = next(e for e in pipeline.events if e.actor == "rollout" and e.phase == "sync")
    gens = [e for e in pipeline.events if e.actor == "rollout" and e.phase == "generate"]
    assert any(abs(g.end - pause.start) < 1e-6 for g in gens) and any(abs(g.start - pause.end) < 1e-6 for g in gens)


class FailingReload(SteppingGenerator):
    def load_weights(self, weights_dir):  # type: ignore[no-untyped-def]
        raise RuntimeError("this engine cannot reload weights")


def test_a_generate_call_waiting_for_weights_that_fail_to_load_fails_too() -> None:
    """Partial rollouts: a generate call waits for the version it is tagged with; if that version's load
    fails, the call raises instead of waiting for ever, and a new pipeline starts counting from 0 again."""
    from concurrent.futures import ThreadPoolExecutor

    from rlsim.errors import RlsimError

    worker = RolloutWorker("rollout", None, lambda: FailingReload([0.0]), pin=False)
    worker.version = 3  # left by an earlier pipeline on this worker
    worker.new_pipeline()
    assert worker.version == 0
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(worker.generate, requests(1, 2), 1)
        time.sleep(0.05)
        assert not waiting.done()  # version 1 is not loaded yet
        with pytest.raises(RuntimeError, match="cannot reload"):
            worker.offer_weights({"w": np.zeros(2, dtype=np.float32)}, 1)
        with pytest.raises(RlsimError, match="version 1 never reached the engine.*cannot reload"):
            waiting.result(timeout=5)
    worker.close()


def test_a_failed_reload_under_auto_falls_back_to_the_simulated_cost_as_in_the_step_schedules() -> None:
    # One backend serves every schedule, so the async pipeline's weight sync follows the same WeightSync rule as
    # run_step's (tests/loop/test_schedules.py): the first failing reload is recorded and simulated, the rest are
    # simulated without trying again.
    gen = FakeGenerator(fail_reload=True)
    backend = InProcessBackend(
        RolloutWorker("rollout", None, lambda: gen, pin=False),
        [ScoringWorker("scorer-0", None, FakeStage, pin=False)],
        TrainerWorker("trainer", None, FakeTrainer, pin=False),
        WeightSync("auto", 0.0),
        threaded=True,
    )
    s = AsyncSettings(2, 2, 1, 8, steps=3, micro_batch=4)
    try:
        pipeline = AsyncPipeline(backend, s, lambda k: requests(2, 2))
        outcomes = [pipeline.next_step() for _ in range(s.steps)]
    finally:
        backend.close()
    assert [o.sync.method for o in outcomes] == ["simulated"] * 3
    assert "cannot reload" in outcomes[0].sync.detail and gen.reloads == []
    with pytest.raises(RlsimError, match="trainer.sync"):  # reload: the same failure stops the run
        failing = InProcessBackend(
            RolloutWorker("rollout", None, lambda: FakeGenerator(fail_reload=True), pin=False),
            [ScoringWorker("scorer-0", None, FakeStage, pin=False)],
            TrainerWorker("trainer", None, FakeTrainer, pin=False),
            WeightSync("reload", 0.0),
            threaded=True,
        )
        try:
            AsyncPipeline(failing, s, lambda k: requests(2, 2)).next_step()
        finally:
            failing.close()
