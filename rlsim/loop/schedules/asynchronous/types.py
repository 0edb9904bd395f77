"""The async schedule's types: its settings and what each update's step yields (the calls it makes are the
loop's ``rlsim.loop.backends.protocol.Backend``, on Ray or in-process).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlsim.loop.schedules.step import StepOutcome


@dataclass(frozen=True)
class AsyncSettings:
    """``steps``: updates in the run; ``micro_batch``: rollouts per scoring call (rounded to whole groups);
    ``stall_s``: longest wait for any call to finish before the run fails (seconds)."""

    prompts_per_step: int
    group_size: int
    max_staleness: int
    queue_size: int
    steps: int
    micro_batch: int = 8
    stall_s: float = 1800.0
    checkpoint: str | None = None  # folder of the trainer's checkpoints, one per update (None: none kept)
    first_version: int = 0  # --resume: updates the stopped run finished (restored from its checkpoint)
    first_batch: int = 0  # --resume: generate calls it made (their prompts and uids are not used again)
    partial_rollouts: bool = False  # weights load between engine steps; a rollout's version is its oldest

    @property
    def batch(self) -> int:
        return self.prompts_per_step * self.group_size


@dataclass(kw_only=True)
class AsyncStepOutcome(StepOutcome):
    """One update's step: a ``StepOutcome`` (so ``records.step_record`` takes it) whose ``events`` are those
    that came back within [start, end) and ``counts`` the rollouts generated / scored in that window and
    trained by this update; plus ``staleness`` (this batch's rollouts per staleness), ``version`` (the
    version it made), the rollouts dropped as stale in the window, and ``sync_latency_s`` (from the
    update's end to the end of the engine's load of it)."""

    staleness: dict[str, int]
    version: int
    dropped_stale: int
    sync_latency_s: float | None = None


def checkpoint_file(folder: str | Path, version: int) -> str:
    """The trainer's checkpoint after update ``version``. One file per version: the checkpoint of an update
    is written before its step's record (the step ends when the engine has loaded the weights too), so the
    file of the last recorded step must survive until the next step's record is on disk."""
    return str(Path(folder) / f"trainer-v{version}.pt")
