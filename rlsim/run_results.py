"""The ``results.json`` of ``rlsim run`` as typed models, shared by the writer and every reader.

Written by the loop (``rlsim.loop.outputs.records.step_record``, ``rlsim.loop.run.RunOutputs``); read by the
loop's report and ``--resume``, the planner (profiles, calibration, validation) and the tests. It
imports nothing from the loop, so the planner reads runs without loading the loop or Ray.

Keys and nesting are the file's own. What every results file has is required; the rest has a
default, because readers also get hand-written and partial files (a run stopped before its actors
started records no placement). Unknown keys are kept (``extra="allow"``), and ``dump()`` writes only
the keys that were set, so a file read and written back keeps its layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from rlsim.errors import RlsimError


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True)


class _OmitsAbsentRoles(_Record):
    """A record whose ``OPTIONAL`` keys are left out of every dump while None: a GRPO step (no reference,
    no critic) keeps the keys it has always had, however it is dumped."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return {k: v for k, v in data.items() if not (k in self.OPTIONAL and v is None)}


class StepTimes(_OmitsAbsentRoles):
    """Seconds within one step: each phase is the union of its events (phases overlap under the
    ``overlapped`` schedule); ``idle`` is step time no actor was working; ``total`` the step's wall time."""

    generate: float
    score: float
    update: float
    sync: float
    idle: float
    total: float
    # Only in steps with a reference or a critic (``update`` is then the union of the last three).
    OPTIONAL: ClassVar[tuple[str, ...]] = ("reference", "values", "advantages", "update_actor", "update_critic")
    reference: float | None = None
    values: float | None = None
    advantages: float | None = None
    update_actor: float | None = None
    update_critic: float | None = None


class RolloutCounts(_OmitsAbsentRoles):
    """Rollouts generated, scored and trained in one step (the loop writes all three); ``referenced``
    and ``valued`` (by the reference and the critic) where those roles ran; ``dropped``: left out of the
    update with their groups (a reward's ``on_timeout: drop``), where any were. All are checked equal:
    ``generated == scored == trained + dropped``."""

    generated: int
    scored: int | None = None
    trained: int | None = None
    OPTIONAL: ClassVar[tuple[str, ...]] = ("referenced", "valued", "dropped")
    referenced: int | None = None
    valued: int | None = None
    dropped: int | None = None


class TokenCounts(_Record):
    """Prompt and generated tokens of one step's rollouts."""

    generated: int
    prompt: int | None = None


class SyncRecord(_Record):
    """How new weights reached the engine: ``vllm-reload``, ``hf-load`` or ``simulated``, in seconds."""

    method: str
    seconds: float
    detail: str = ""
    # schedule async only: seconds from the update's end until the engine had its weights (the load waits
    # for the engine's current generate call); verl's fully async ``timing_s/param_sync``.
    latency_s: float | None = Field(None, exclude_if=lambda v: v is None)


class StepRecord(_Record):
    """One step. ``cpu_s``: CPU seconds per actor (children included); ``busy_s``: seconds each actor
    worked; ``gpu_s``: estimated GPU-seconds per GPU-holding actor; ``overhead_fraction``: idle / total;
    ``train``: the trainer's statistics (loss, grad norm, sequences, ...)."""

    step: int
    schedule: str | None = None
    time_s: StepTimes
    rollouts: RolloutCounts
    cpu_s: dict[str, float] = Field(default_factory=dict)
    busy_s: dict[str, float] = Field(default_factory=dict)
    tokens: TokenCounts | None = None
    gpu_s: dict[str, float] = Field(default_factory=dict)
    overhead_fraction: float | None = None
    busiest_actor_gap_fraction: float | None = None
    sync: SyncRecord | None = None
    train: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)  # verl's names (rlsim.metrics.framework_names)
    # schedule async only: the policy version this update made, its rollouts per staleness
    # ({"0": n, "1": n, ...}: versions behind the trainer) and the rollouts dropped as stale during the step.
    # Left out of the file when unset, so the other schedules' records keep their layout.
    policy_version: int | None = Field(None, exclude_if=lambda v: v is None)
    staleness: dict[str, int] | None = Field(None, exclude_if=lambda v: v is None)
    dropped_stale: int | None = Field(None, exclude_if=lambda v: v is None)
    # async.partial_rollouts only: this update's rollouts by the policy versions between their first and last
    # token ({"0": n, "1": n}: 0 when one version sampled all of it)
    version_span: dict[str, int] | None = Field(None, exclude_if=lambda v: v is None)
    # rewards that are no model (function, sandbox, genrm): calls counted by outcome over the step ({"timeouts": 1,
    # "bank_programs": 32, "judge_prompt_tokens": 900, ...}, rlsim.rewards); left out when nothing was counted
    reward_outcomes: dict[str, int] | None = Field(None, exclude_if=lambda v: v is None)
    # step-by-step schedules: each scoring replica's calls and rollouts, calls re-sent to it after another died,
    # and its queue depth (calls outstanding, the new one included) at each send, max and mean
    # (rlsim.replica_router); its busy time is busy_s["scorer-K"]
    scoring_replicas: list[dict[str, float | int]] | None = Field(None, exclude_if=lambda v: v is None)


class AsyncRecord(_Record):
    """``schedule: async`` over the whole run so far. Fractions of the run's wall time (first generate call
    to the last step's end) during which the trainer (update, weight export) or the rollout worker
    (generation, weight load) did no work; ``weight_sync_pause_s``: seconds the engine spent loading
    weights instead of generating; ``queue_length``: [seconds since the run's start, scored rollouts
    waiting] at each change. ``partial_rollouts``: weights were loaded between engine steps; then
    ``version_span_histogram`` counts trained rollouts by the versions between their first and last token,
    and ``staleness_histogram`` counts each at its oldest version."""

    max_staleness: int
    staleness_histogram: dict[str, int]
    trainer_idle_fraction: float
    rollout_idle_fraction: float
    rollouts_trained_per_hour: float
    tokens_trained_per_hour: float | None = None
    wall_s: float | None = None
    weight_sync_pause_s: float | None = None
    queue_size: int | None = None
    queue_length: list[tuple[float, int]] = Field(default_factory=list)
    partial_rollouts: bool = False
    version_span_histogram: dict[str, int] | None = Field(None, exclude_if=lambda v: v is None)


class RolloutTotals(_Record):
    """Every rollout generated in the run has one fate: ``generated == trained + dropped_stale +
    dropped_reward + unfinished_at_end`` (unfinished: still queued or in flight when the last step ended;
    ``dropped_reward``: groups a reward's ``on_timeout: drop`` left out, written only when there are any)."""

    generated: int
    trained: int
    dropped_stale: int
    dropped_reward: int = Field(0, exclude_if=lambda v: v == 0)
    unfinished_at_end: int


class PlacementRecord(_Record):
    """Where one role's actors ran: pinned ``cores``, compute ``threads``, GPU share, Ray's CPU share."""

    cores: list[int]
    threads: int | None = None
    gpu: float = 0.0
    num_cpus: float | None = None


class RunResults(_Record):
    """A whole run. ``config``: the run's config as recorded (a ``RunConfig`` dump; kept as written, since
    a file may predate settings added since: ``RunConfig.model_validate`` it where the loop is at hand).
    ``faults``: injected / survived counts and more; ``startup_s``: seconds before step 1, per part.
    ``async`` (``async_`` in Python, a keyword) and ``rollouts_total``: schedule async only."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, populate_by_name=True, serialize_by_alias=True)

    rlsim_version: str | None = None
    # trainer.algorithm: written for rloo and ppo; a GRPO file keeps its earlier keys (and reads as grpo).
    algorithm: str = "grpo"
    config: dict[str, Any] = Field(default_factory=dict)
    # trainer.conventions other than rlsim: the preset, each convention key's value and source
    # (rlsim.loop.config.conventions)
    conventions: dict[str, Any] | None = None
    complete: bool = False
    steps: list[StepRecord]
    overhead_fraction: float = 0.0
    faults: dict[str, int] = Field(default_factory=lambda: {"injected": 0, "survived": 0})
    resumed_at_step: int | None = None
    faults_before_resume: dict[str, int] | None = None
    startup_s: dict[str, float] = Field(default_factory=dict)
    # how many of ``steps`` are warm-up, not to be measured: written by the planner's loop runner, which runs
    # no warm-up on warm actors (``rlsim.planner.measure.loop_runner``); None: the reader's own rule
    warmup_steps: int | None = Field(default=None, ge=0)
    placement: dict[str, PlacementRecord] = Field(default_factory=dict)
    actors: list[dict[str, Any]] = Field(default_factory=list)
    ray_nodes: int | None = None
    environment: dict[str, Any] = Field(default_factory=dict)
    overhead_fraction_after_step1: float | None = None
    gemm_peak_gflops: float | None = None  # the GEMM rate behind perf/mfu/actor, measured at start
    gemm_peak_threads: int | None = None
    async_: AsyncRecord | None = Field(None, alias="async")  # schedule: async only
    rollouts_total: RolloutTotals | None = None

    def warmup(self, default: int) -> int:
        """How many leading steps are warm-up: the recorded ``warmup_steps``, else the reader's ``default``."""
        return default if self.warmup_steps is None else self.warmup_steps

    def dump(self) -> dict[str, Any]:
        """The JSON object to write: the keys that were set (or read), in the file's layout."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def parse(cls, data: Any, source: str | Path) -> RunResults:
        """Validate loaded JSON; ``RlsimError`` naming what is missing (``source`` names the file)."""
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            problems = "; ".join(_describe(e) for e in err.errors()[:4])
            raise RlsimError(f"{source}: {problems}; it must be the results.json of `rlsim run`") from None

    @classmethod
    def read(cls, path: str | Path) -> RunResults:
        """Load and validate a results.json; ``RlsimError`` if it is missing, not JSON or not a run's."""
        p = Path(path)
        if not p.is_file():
            raise RlsimError(f"results file {p} does not exist; run the loop (`rlsim run CONFIG --out DIR`) first")
        try:
            data = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RlsimError(f"{p} is not valid JSON ({err}); point at a results.json written by rlsim") from None
        return cls.parse(data, p)

    def rollouts_per_step(self) -> int | None:
        """Sequences submitted per step (``config.workload``: prompts x group size); None if not recorded."""
        workload = self.config.get("workload")
        try:
            return int(workload["prompts_per_step"]) * int(workload["group_size"])  # type: ignore[index]
        except (KeyError, TypeError, ValueError):
            return None


def _describe(error: Any) -> str:
    """A pydantic error as ``steps[0] lacks time_s.score`` (missing) or ``steps[0].step: <message>``."""
    loc = list(error["loc"])
    cut = max((i for i, part in enumerate(loc) if isinstance(part, int)), default=-1) + 1
    where = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc[:cut]))
    field = ".".join(str(p) for p in loc[cut:])
    if error["type"] == "missing":
        return f"{where or 'the file'} lacks {field}"
    path = ".".join(part for part in (where, field) if part) or "the file"
    return f"{path}: {error['msg']}"
