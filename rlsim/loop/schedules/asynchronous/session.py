"""``schedule: async`` on a started ``LoopSession``: one ``AsyncPipeline`` over the session's actors for the
whole run, handing back one step record per update (``LoopSession.step`` calls ``AsyncRun.step``).

Batch ``k`` (from 0) draws the prompts that step ``k + 1`` draws under the other schedules, so runs of
the three schedules see the same workload. Per-step CPU seconds are not probed: an actor answers a probe
only after its current call, and waiting for that would stall the pipeline being measured.

``--resume``: the pipeline's queue cannot outlive its process, so a resumed run starts a fresh pipeline
at the stopped run's policy version. The trainer's checkpoint of that version (weights, AdamW state;
one file per update in ``--out/checkpoints/``, older ones removed once a later step is on disk) is
restored and loaded into the engine before the first generate call; the stopped run's queued and
in-flight rollouts were already counted ``unfinished_at_end`` in its last ``results.json``, and their
prompts are not drawn again (the resumed run's batches continue the numbering).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.loop.backends.protocol import Backend
from rlsim.loop.config import RunConfig
from rlsim.loop.outputs.asynchronous import async_step_record, async_summary
from rlsim.loop.schedules.asynchronous.pipeline import AsyncPipeline, AsyncSettings
from rlsim.loop.schedules.asynchronous.types import checkpoint_file
from rlsim.loop.schedules.step import Progress
from rlsim.rollout.prompts import make_step_requests
from rlsim.run_results import AsyncRecord, RolloutTotals, RunResults, StepRecord

CHECKPOINTS = "checkpoints"  # in the run's --out folder: trainer-v<version>.pt after each update


@dataclass(frozen=True)
class AsyncStart:
    """Where an async run starts. ``checkpoint``: the folder of the trainer's checkpoints (None: none kept);
    ``steps_done``, ``batches_done``, ``before``: the stopped run's finished updates, generate calls and
    its top-level ``async`` / ``rollouts_total`` records (``--resume``; zero and None for a new run)."""

    checkpoint: Path | None = None
    steps_done: int = 0
    batches_done: int = 0
    before: tuple[AsyncRecord, RolloutTotals] | None = None


def async_start(config: RunConfig, out: Path, previous: RunResults | None) -> AsyncStart:
    """The ``AsyncStart`` of a run writing to ``out``; ``previous``: the results a ``--resume`` continues.

    Raises ``RlsimError`` (before anything starts) when the stopped run cannot be continued exactly."""
    # Absolute: the trainer actor writes it from its own working directory (on its own node: a cluster of
    # several machines needs --out on a file system they share for --resume to find it).
    checkpoint = out.resolve() / CHECKPOINTS if config.async_.checkpoint else None
    if previous is None or not previous.steps:
        return AsyncStart(checkpoint)
    done = len(previous.steps)
    fix = "start a new run (another --out, or without --resume)"
    if checkpoint is None:
        raise RlsimError(f"--resume: async.checkpoint is false, so no trainer state was kept to continue from; {fix}")
    if not Path(checkpoint_file(checkpoint, done)).is_file():
        raise RlsimError(
            f"--resume: {checkpoint_file(checkpoint, done)} is missing, so the trainer's policy after step {done} "
            f"cannot be restored; {fix}"
        )
    if previous.steps[-1].policy_version != done or previous.async_ is None or previous.rollouts_total is None:
        raise RlsimError(f"--resume: {out}/results.json lacks the async records of its {done} steps; {fix}")
    batch = config.workload.prompts_per_step * config.workload.group_size
    totals = previous.rollouts_total
    return AsyncStart(checkpoint, done, totals.generated // batch, (previous.async_, totals))


class AsyncRun:
    """The run's pipeline on ``backend`` (Ray actors, or in-process workers in tests)."""

    def __init__(self, config: RunConfig, backend: Backend, start: AsyncStart | None = None) -> None:
        start = start or AsyncStart()
        w = config.workload
        batch = w.prompts_per_step * w.group_size
        settings = AsyncSettings(
            w.prompts_per_step,
            w.group_size,
            config.async_.max_staleness,
            config.async_.resolved_queue_size(batch),
            steps=config.steps,
            micro_batch=config.micro_batch,
            stall_s=config.faults.generate_timeout_s,
            checkpoint=str(start.checkpoint) if start.checkpoint else None,
            first_version=start.steps_done,
            first_batch=start.batches_done,
            partial_rollouts=config.async_.partial_rollouts,
        )
        self.pipeline = AsyncPipeline(
            backend, settings, lambda k: make_step_requests(w.spec, k + 1, w.prompts_per_step, w.group_size)
        )
        self._before = start.before
        self._checkpoints = start.checkpoint
        self._next = start.steps_done + 1
        self._last_end: float | None = None

    def step(self, step: int, progress: Progress | None = None) -> tuple[StepRecord, list[dict[str, Any]]]:
        if step != self._next:
            raise RlsimError(
                f"schedule async runs its steps in one pipeline (asked for step {step}, next is {self._next})"
            )
        self._prune_checkpoints(keep_from=step - 1)
        outcome = self.pipeline.next_step(progress)
        self._next += 1
        self._last_end = outcome.end
        assert self.pipeline.start is not None
        return async_step_record(step, outcome, {}, self.pipeline.start)

    def _prune_checkpoints(self, keep_from: int) -> None:
        """Remove checkpoints older than ``keep_from``: the caller asks for step ``keep_from + 1`` only once
        step ``keep_from``'s record is on disk, so its checkpoint is the oldest a --resume can need."""
        if self._checkpoints is None or not self._checkpoints.is_dir():
            return
        for path in self._checkpoints.glob("trainer-v*.pt"):
            version = path.stem.removeprefix("trainer-v")
            if version.isdigit() and int(version) < keep_from:
                path.unlink(missing_ok=True)

    def summary(self) -> dict[str, Any]:
        """The top-level ``async`` and ``rollouts_total`` records up to the last finished step (with the
        stopped run's, when this one resumed it)."""
        if self._last_end is None:
            return {}
        return async_summary(self.pipeline, self._last_end, self._before)


def async_step(
    session: Any, step: int, schedule: str, progress: Progress | None
) -> tuple[StepRecord, list[dict[str, Any]]]:
    """``LoopSession.step`` for ``schedule: async``: the session's ``AsyncRun`` on the session's backend, made on
    first use."""
    assert session.backend is not None, "call start() first"
    if session.async_run is None:
        session.async_run = AsyncRun(session.config, session.backend, session.async_start)
    return session.async_run.step(step, progress)
