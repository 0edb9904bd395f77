"""The together condition under ``schedule: async``: one whole async pipeline of ``updates`` updates.

A faster scorer does not shorten an async step; the capacity it frees shows up as more rollouts trained
per hour, fresher rollouts (lower staleness) or less trainer idle time. So the condition runs the loop's
own ``AsyncPipeline`` on the runtime's actors and reads the loop's own async record
(``rlsim.loop.outputs.asynchronous.async_summary``) beside the usual together figures, which stay per update
(``step_s``: wall seconds per update), so freed core-seconds and the stopping rule work unchanged.

Batch ``k`` of measured step ``s`` draws step ``ASYNC_STEP_BASE + 1000 s + k``'s prompts: every runtime
and trial of a step sees the same work, and none of it is a prompt the other conditions drew.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlsim.experiment.conditions import TogetherResult, Workload, together_figures
from rlsim.loop.backends.protocol import Backend
from rlsim.loop.outputs.asynchronous import async_summary
from rlsim.loop.schedules.asynchronous.pipeline import AsyncPipeline, AsyncSettings
from rlsim.rollout.prompts import make_step_requests
from rlsim.rollout.types import Rollout, RolloutRequest

ASYNC_STEP_BASE = 200_000


@dataclass
class AsyncTogether:
    """``TogetherRun`` for ``schedule: async``: a fresh ``AsyncPipeline`` of ``settings.steps`` updates
    on ``backend`` per call (the actors keep their weights from one call to the next, as they do
    between the steps of the overlapped condition)."""

    backend: Backend
    work: Workload
    settings: AsyncSettings
    clock: Callable[[], float] = field(default=time.time)

    def __call__(self, step: int) -> TogetherResult:
        w = self.work

        def batch(k: int) -> Sequence[RolloutRequest]:
            return make_step_requests(w.spec, ASYNC_STEP_BASE + 1000 * step + k, w.prompts, w.group)

        # Every generated rollout is kept: generation throughput counts the dropped and unfinished too.
        pipeline = AsyncPipeline(self.backend, self.settings, batch, self.clock, keep_generated=True)
        outcomes = [pipeline.next_step() for _ in range(self.settings.steps)]  # the last one drains
        assert pipeline.generated is not None
        figures = async_figures(pipeline, pipeline.generated, outcomes[-1].end, self.clock())
        return figures, {"updates": self.settings.steps, "sync": outcomes[-1].sync.method}, pipeline.events


def async_together(config: Any, backend: Backend, work: Workload, experience: bool) -> AsyncTogether:
    """The together condition of ``schedule: async`` (its ``SCHEDULES`` entry's ``together``): a pipeline of
    ``contention.async_updates`` updates per call, set as the loop's ``async`` section says. ``config``: the
    experiment's ``ContentionConfig``; ``experience`` is always False here (the config refuses PPO's roles)."""
    loop = config.loop
    w, a = loop.workload, loop.async_
    settings = AsyncSettings(
        w.prompts_per_step,
        w.group_size,
        a.max_staleness,
        a.resolved_queue_size(w.prompts_per_step * w.group_size),
        steps=config.contention.async_updates,
        micro_batch=loop.micro_batch,
        stall_s=loop.faults.generate_timeout_s,
        partial_rollouts=a.partial_rollouts,
    )
    return AsyncTogether(backend, work, settings)


def async_figures(
    pipeline: AsyncPipeline, generated: Sequence[Rollout], end: float, drained: float
) -> dict[str, float]:
    """The together figures of a finished pipeline, per update, plus its async record.

    ``end``: when the last update's weight sync finished (the async record's wall time ends there, as in
    ``rlsim run``); ``drained``: when the calls still in flight after it had finished too (generation
    and scoring figures count every event up to then). Keys beside ``together_figures``' own:
    ``rollouts_trained_per_hour``, ``tokens_trained_per_hour``, ``mean_staleness`` (policy versions,
    mean over trained rollouts), ``trainer_idle_fraction``, ``rollout_idle_fraction``, ``dropped_stale``,
    ``unfinished_at_end``, ``weight_sync_pause_s``, ``wall_s``; ``step_s`` is ``wall_s`` per update.
    """
    assert pipeline.start is not None, "the pipeline never ran"
    summary = async_summary(pipeline, end)
    record, totals = summary["async_"], summary["rollouts_total"]
    figures = together_figures(pipeline.events, pipeline.start, drained, generated)
    updates = pipeline.settings.steps
    hist = record.staleness_histogram
    trained = sum(hist.values())
    wall = record.wall_s or 0.0
    figures.update(
        {
            "step_s": wall / updates,
            "rollouts": float(totals.trained),
            "rollouts_trained_per_hour": record.rollouts_trained_per_hour,
            "tokens_trained_per_hour": record.tokens_trained_per_hour or 0.0,
            "mean_staleness": sum(int(k) * n for k, n in hist.items()) / trained if trained else 0.0,
            "trainer_idle_fraction": record.trainer_idle_fraction,
            "rollout_idle_fraction": record.rollout_idle_fraction,
            "dropped_stale": float(totals.dropped_stale),
            "unfinished_at_end": float(totals.unfinished_at_end),
            "weight_sync_pause_s": record.weight_sync_pause_s or 0.0,
            "wall_s": wall,
        }
    )
    return figures
