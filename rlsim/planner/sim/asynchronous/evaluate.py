"""A placement under ``schedule: async``, simulated and summarised like the sync schedules' ``Evaluation``.

The run is ``steps`` updates of ``pipeline.AsyncSimulation`` on the profile's costs
(``costs``). A "step" is what the loop records for async: the time from one update's weight sync
to the next one's, with the phases' busy time inside it. The first step also fills the pipeline and the
last drains it (nothing is left to generate, so its weights load at once); a long run has neither, so
``rollouts_per_hour`` (what the search ranks by) and ``step_time_s`` are over the steps between them
(``steady_steps``, 1-based and inclusive; all of them for runs too short to have any).
``extra["async"]`` has what results.json's ``async`` block has (rollouts trained per hour over the
whole run, the staleness histogram, idle fractions, every rollout's fate) and the steady rate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from rlsim.planner.profile.schema import ContentionEntry
from rlsim.planner.sim.asynchronous.costs import ProfileCosts, SharedCores
from rlsim.planner.sim.asynchronous.pipeline import (
    ROLLOUT,
    TRAINER,
    AsyncSimulation,
    PipelineRun,
    PipelineShape,
    union_of,
)
from rlsim.planner.sim.step import pool_shape
from rlsim.planner.sim.step_types import PHASES, StepInputs, StepResult
from rlsim.planner.sim.summary import Evaluation, summarise
from rlsim.planner.spec.placement import PlacementError

NO_CONTENTION = ContentionEntry(gen_slowdown=0.0, score_slowdown=0.0)


def pipeline_shape(inputs: StepInputs, steps: int) -> PipelineShape:
    """The pipeline of ``inputs.spec``: its bound and queue (None: ``(max_staleness + 1)`` batches, as
    ``rlsim.loop.config.asynchronous.AsyncConfig.resolved_queue_size``), micro-batches of ``batcher.window``."""
    spec, w = inputs.spec, inputs.workload
    batch = w.rollouts_per_step
    queue = spec.queue_size if spec.queue_size is not None else (spec.max_staleness + 1) * batch
    if queue < batch:
        raise PlacementError(
            f"queue_size {queue} rollouts cannot hold one training batch (prompts_per_step x group_size = "
            f"{batch}); raise it to at least {batch}"
        )
    return PipelineShape(
        prompts_per_step=w.prompts_per_step,
        group_size=w.group_size,
        max_staleness=spec.max_staleness,
        queue_size=queue,
        steps=steps,
        micro_batch=spec.batcher.window,
        scorers=scoring_workers(inputs),
        partial_rollouts=spec.partial_rollouts,
    )


def scoring_workers(inputs: StepInputs) -> int:
    """The pipeline's scoring workers: the scorer replicas, or for a rule-based reward its scoring actors, each
    a pool of worker processes (a call's rollouts spread over the pool: ``costs.ProfileCosts._pool_s``)."""
    if inputs.function is None:
        return inputs.resources.replicas
    return inputs.resources.nodes * pool_shape(inputs)[1]


def simulate_async(inputs: StepInputs, steps: int, seed: int) -> tuple[PipelineRun, ProfileCosts, SharedCores]:
    """``steps`` updates of the async pipeline on ``inputs``; the run, its costs and the contention it used."""
    roles, res = inputs.profile.roles, inputs.resources
    threads = max(*SharedCores.threads(res), 1.0)  # the busiest process sharing the pool picks the efficiency
    # CPU workers of a rule-based reward beside GPU engines share nothing with them (as in step.py)
    entry = inputs.contention if inputs.function is None or res.gen_device == "cpu" else NO_CONTENTION
    speeds = SharedCores(res, entry, roles.efficiency(threads) if roles else None, scoring_workers(inputs))
    costs = ProfileCosts(inputs, seed)
    return AsyncSimulation(pipeline_shape(inputs, steps), costs, speeds).run(), costs, speeds


def evaluate_async(
    inputs: StepInputs, steps: int, seed: int = 0, on_step: Callable[[int], None] | None = None
) -> Evaluation:
    """The ``Evaluation`` of an async placement (see the module docstring)."""
    run, costs, speeds = simulate_async(inputs, steps, seed)
    results = [_window(inputs, run, costs, i) for i in range(len(run.step_ends))]
    if on_step:
        for i in range(len(results)):
            on_step(i)
    n = len(results)
    first, last = (1, n - 1) if n >= 3 else (0, n)
    ev = summarise(inputs.spec, inputs.resources, results[first:last], inputs.profile.illustrative)
    name, detail = async_bottleneck(run)
    summary = async_summary(run, first, last)
    if speeds.trainer_contends and (
        speeds.efficiency is not None or inputs.contention.gen_slowdown or inputs.contention.score_slowdown
    ):
        summary["assumptions"] = [speeds.assumption()]
    return dataclasses.replace(
        ev,
        steps=results,
        rollouts_per_hour=summary["steady_rollouts_trained_per_hour"],
        bottleneck=name,
        bottleneck_detail=detail,
        extra={**ev.extra, "async": summary},
    )


def async_summary(run: PipelineRun, first: int, last: int) -> dict[str, Any]:
    """results.json's ``async`` and ``rollouts_total`` figures of a simulated run, plus the steady rate
    over steps ``first + 1 .. last``."""
    s = run.shape
    pauses = [e - b for b, e, phase in run.busy.get(ROLLOUT, []) if phase == "sync" and b < run.end_s]
    return {
        "max_staleness": s.max_staleness,
        "queue_size": s.queue_size,
        "staleness_histogram": run.histogram(),
        "mean_staleness": run.mean_staleness(),
        "trainer_idle_fraction": run.idle_fraction(TRAINER),
        "rollout_idle_fraction": run.idle_fraction(ROLLOUT),
        "rollouts_trained_per_hour": run.rollouts_per_hour(),
        "steady_rollouts_trained_per_hour": run.rollouts_per_hour(first, last),
        "steady_steps": [first + 1, last],
        "wall_s": run.end_s,
        "weight_sync_pause_s": float(sum(pauses)),
        "rollouts_total": dict(run.totals),
        "step_ends_s": list(run.step_ends),
    }


def async_bottleneck(run: PipelineRun) -> tuple[str, str]:
    """The busiest stage of the pipeline: the engine (generation), the scorers (the mean busy share of the
    scoring workers) or the trainer (update)."""
    gen_idle, train_idle = run.idle_fraction(ROLLOUT), run.idle_fraction(TRAINER)
    scorers = [w for w in run.busy if w.startswith("scorer")]  # a scorer never sent a call is idle throughout
    score_busy = sum(1.0 - run.idle_fraction(w) for w in scorers) / run.shape.scorers
    hist = run.histogram()
    if score_busy > max(1 - gen_idle, 1 - train_idle):
        return "scoring", (
            f"async: the scorers are busy {score_busy:.0%} of the run while the engine idles {gen_idle:.0%} "
            f"and the trainer {train_idle:.0%}; faster or more scoring (replicas, workers) trains more per hour"
        )
    if gen_idle <= train_idle:
        return "generation", (
            f"async: the engine is busy {1 - gen_idle:.0%} of the run and the trainer waits "
            f"{train_idle:.0%} of it for batches; faster generation (or more engines) trains more per hour"
        )
    return "update", (
        f"async: the trainer is busy {1 - train_idle:.0%} of the run while the engine idles {gen_idle:.0%} "
        f"(staleness {hist}); a faster update, not faster generation or scoring, trains more per hour"
    )


def _window(inputs: StepInputs, run: PipelineRun, costs: ProfileCosts, i: int) -> StepResult:
    """Step ``i + 1`` as the loop records it: the calls that ended between two syncs, clipped to that
    window, and each phase's busy time (the union over workers)."""
    start = run.step_ends[i - 1] if i else 0.0
    end = run.step_ends[i]
    spans = {w: [(max(b, start), e, p) for b, e, p in calls if start < e <= end] for w, calls in run.busy.items()}
    every = [(b, e) for calls in spans.values() for b, e, _ in calls]
    time_s = {p: union_of([(b, e) for calls in spans.values() for b, e, q in calls if q == p]) for p in PHASES[:-1]}
    time_s.update(idle=(end - start) - union_of(every), score_tail=0.0, total=end - start)
    res = inputs.resources
    gen_busy = union_of([(b, e) for b, e, p in spans.get(ROLLOUT, []) if p == "generate"])
    score_busy = sum(e - b for w, calls in spans.items() if w.startswith("scorer") for b, e, _ in calls)
    trained = len(run.trained[i]) * run.shape.group_size
    tokens = costs.response_tokens(run.trained[i])
    return StepResult(
        time_s=time_s,
        rollouts=trained,
        tokens=tokens,
        gen_busy_unit_s=gen_busy * res.engine_units * res.engines,
        score_busy_unit_s=score_busy * res.replica_units * res.replicas / run.shape.scorers,
        engine_makespan_mean_s=gen_busy,
        engine_makespan_max_s=gen_busy,
        idle_engines=0,
        batches=0,
        padding_waste=0.0,
        rounds=1,
    )
