"""``schedule: async`` on a started ``LoopSession``: one ``AsyncPipeline`` over the session's actors for the
whole run, handing back one step record per update (``LoopSession.step`` calls ``AsyncRun.step``).

Batch ``k`` (from 0) draws the prompts that step ``k + 1`` draws under the other schedules, so runs of
the three schedules see the same workload. Per-step CPU seconds are not probed: an actor answers a probe
only after its current call, and waiting for that would stall the pipeline being measured.
"""

from __future__ import annotations

from typing import Any

from rlsim.errors import RlsimError
from rlsim.loop.async_records import async_step_record, async_summary
from rlsim.loop.async_schedule import AsyncPipeline, AsyncSettings
from rlsim.loop.schedules import Progress
from rlsim.loop.sync import WeightSync
from rlsim.rollout.prompts import make_step_requests
from rlsim.run_results import StepRecord


class AsyncRun:
    def __init__(self, session: Any) -> None:
        from rlsim.loop.async_ray import RayAsyncBackend

        cfg = session.config
        w = cfg.workload
        batch = w.prompts_per_step * w.group_size
        settings = AsyncSettings(
            w.prompts_per_step,
            w.group_size,
            cfg.async_.max_staleness,
            cfg.async_.resolved_queue_size(batch),
            steps=cfg.steps,
            micro_batch=cfg.micro_batch,
            stall_s=cfg.faults.generate_timeout_s,
        )
        backend = RayAsyncBackend(session.backend, WeightSync(cfg.trainer.sync, cfg.trainer.simulated_sync_s))
        self.pipeline = AsyncPipeline(
            backend, settings, lambda k: make_step_requests(w.spec, k + 1, w.prompts_per_step, w.group_size)
        )
        self._next = 1
        self._last_end: float | None = None

    def step(self, step: int, progress: Progress | None = None) -> tuple[StepRecord, list[dict[str, Any]]]:
        if step != self._next:
            raise RlsimError(
                f"schedule async runs its steps in one pipeline from step 1 (asked for step {step}, "
                f"next is {self._next}); --resume is not supported for it: start a new run"
            )
        outcome = self.pipeline.next_step(progress)
        self._next += 1
        self._last_end = outcome.end
        assert self.pipeline.start is not None
        return async_step_record(step, outcome, {}, self.pipeline.start)

    def summary(self) -> dict[str, Any]:
        """The top-level ``async`` and ``rollouts_total`` records up to the last finished step."""
        if self._last_end is None:
            return {}
        return async_summary(self.pipeline, self._last_end)


def async_step(session: Any, step: int, progress: Progress | None) -> tuple[StepRecord, list[dict[str, Any]]]:
    """``LoopSession.step`` for ``schedule: async``: the session's ``AsyncRun``, made on first use."""
    assert session.backend is not None, "call start() first"
    if session.async_run is None:
        session.async_run = AsyncRun(session)
    return session.async_run.step(step, progress)
