"""The ``rlsim plan`` YAML: a cluster, a workload, the placement to evaluate and the placements to search.

Profile paths are relative to the YAML file's folder. Everything is validated here, at the edge;
the simulation only sees typed objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.config_loader import apply_overrides, load_yaml, validate
from rlsim.planner.spec.workload import Workload
from rlsim.schedule_kinds import ScheduleName, schedule_kind

Schedule = ScheduleName  # an entry of rlsim.schedule_kinds.SCHEDULES


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeSpec(_Cfg):
    """``count`` identical nodes of hardware ``kind``, each with ``cores`` CPU cores and ``gpus`` GPUs.

    ``gpu_model`` / ``cpu_model``: what the nodes hold (e.g. ``H100-SXM5-80GB``), compared with the
    profile's machine fingerprint so that a profile of other hardware is flagged (None: not checked).
    """

    count: int = Field(ge=1)
    cores: int = Field(ge=1)
    gpus: int = Field(default=0, ge=0)
    kind: str
    gpu_model: str | None = None
    cpu_model: str | None = None


class BatcherSpec(_Cfg):
    """How finished rollouts are grouped for a scorer (the batchers of ``rlsim.batching``).

    ``fixed``: arrival order, ``batch_size`` each. ``sorted``: sort a window by length, then
    ``batch_size`` each. ``token-budget``: sort a window, fill each batch while longest x count <=
    ``token_budget``. ``dynamic``: flush at ``batch_size`` or when the oldest waited ``max_wait_s``.
    ``window``: rollouts collected before ``sorted``/``token-budget`` sort them while generation is
    still running (the overlapped schedule); the sequential schedule sorts the whole step at once.
    """

    kind: Literal["fixed", "sorted", "token-budget", "dynamic"]
    batch_size: int | None = Field(default=None, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    max_wait_s: float = Field(default=0.05, ge=0)
    window: int = Field(default=128, ge=1)

    @model_validator(mode="after")
    def _check(self) -> BatcherSpec:
        if self.kind == "token-budget" and self.token_budget is None:
            raise ValueError("a token-budget batcher needs token_budget (padded tokens per batch, e.g. 8192)")
        if self.kind != "token-budget" and self.batch_size is None:
            raise ValueError(f"a {self.kind} batcher needs batch_size (sequences per batch, e.g. 32)")
        return self

    def label(self) -> str:
        """Short name such as ``sorted/32``, ``token-budget/8192`` or ``dynamic/32@50ms``."""
        if self.kind == "token-budget":
            return f"token-budget/{self.token_budget}"
        if self.kind == "dynamic":
            return f"dynamic/{self.batch_size}@{self.max_wait_s * 1000:g}ms"
        return f"{self.kind}/{self.batch_size}"


class PlacementSpec(_Cfg):
    """One placement: what runs where, and how scoring is fed.

    ``colocated``: scorers share every unit with the generation engines (contention applies while
    both run); otherwise ``scoring_share`` of each node's scorer-device units is reserved for
    scoring. ``runtime`` is a profile runtime key (``ort`` or ``ort@cpu``). ``engine_units``:
    cores/GPUs per generation engine (None: the profile's, or every generation core of a CPU node).
    ``nodes``: how many of the cluster's nodes the plan uses (None: all). ``max_running``: vLLM's
    ``max_num_seqs`` per engine (None: what the profile's engine holds, scaled by its units).
    ``dispatch``: ``pull`` (an idle replica takes the next batch) or ``round_robin`` (rlsim's loop:
    micro-batches of ``batcher.window`` rollouts dealt to replicas in turn). ``train_on``: the units
    the update runs on (``scoring``: the loop's split preset puts the trainer beside the scorers).
    ``max_length``: reward-model truncation in tokens (None: the profile's). ``runtime`` may also
    name one of the profile's ``reward_functions`` (a rule-based reward on CPU workers): then
    ``replicas_per_node`` is the number of worker processes per node (the concurrency cap, one core
    each, sharing them when they outnumber the cores) taken from the ``scoring_share`` of free host cores, and
    ``pool_workers`` how many of them each scoring actor holds (None: one actor per node holds them all); an
    actor takes one batch at a time, spread over its workers. ``tp`` x ``pp``: GPUs per engine with
    tensor and pipeline parallelism (the profile's ``generation.parallel`` scaling). ``train_nodes``:
    0 trains on the generation GPUs (colocated pools, a hybrid engine); otherwise that many of the
    used nodes hold only the data-parallel trainer (split pools) and the rest generate.
    ``schedule: async`` (``rlsim.planner.sim.asynchronous.pipeline``): generation runs ahead of training by at most
    ``max_staleness`` policy versions, with ``queue_size`` scored rollouts buffered for the trainer (None:
    ``max_staleness + 1`` batches, as the loop's ``async.queue_size``); micro-batches of ``batcher.window``
    rollouts go to the scorers; ``partial_rollouts``: the engine loads new weights between its steps, during
    the generate call under way (the loop's ``async.partial_rollouts``). All are ignored by the other schedules.
    """

    schedule: Schedule = "overlapped"
    colocated: bool = False
    runtime: str
    batcher: BatcherSpec
    scoring_share: float = Field(default=0.25, ge=0, le=1)
    replicas_per_node: int = Field(default=1, ge=1)
    engine_units: float | None = Field(default=None, gt=0)
    nodes: int | None = Field(default=None, ge=1)
    max_running: int | None = Field(default=None, ge=1)
    dispatch: Literal["pull", "round_robin"] = "pull"
    train_on: Literal["generation", "scoring"] = "generation"
    max_length: int | None = Field(default=None, ge=1)
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    train_nodes: int = Field(default=0, ge=0)
    max_staleness: int = Field(default=1, ge=0)
    queue_size: int | None = Field(default=None, ge=1)
    partial_rollouts: bool = False
    pool_workers: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> PlacementSpec:
        if self.pool_workers is not None and self.replicas_per_node % self.pool_workers:
            raise ValueError(
                f"replicas_per_node {self.replicas_per_node} is not a multiple of pool_workers {self.pool_workers}: "
                "a rule-based reward's workers come in whole scoring actors"
            )
        if self.tp * self.pp > 1 and self.engine_units not in (None, self.tp * self.pp):
            raise ValueError(
                f"engine_units {self.engine_units:g} contradicts tp {self.tp} x pp {self.pp}; "
                "give one of them (a tp x pp engine holds tp x pp GPUs)"
            )
        return self

    def label(self) -> str:
        where = "colocated" if self.colocated else f"split {self.scoring_share:.0%}"
        nodes = f" {self.nodes}n" if self.nodes else ""
        eng = f" eng{self.engine_units:g}" if self.engine_units else ""
        par = f" tp{self.tp}" + (f"pp{self.pp}" if self.pp > 1 else "") if self.tp * self.pp > 1 else ""
        train = f" train{self.train_nodes}n" if self.train_nodes else ""
        return (
            f"{self.runtime} {self.batcher.label()} x{self.replicas_per_node}/node {where} "
            f"{self.schedule_label()}{eng}{par}{train}{nodes}"
        )

    def schedule_label(self) -> str:
        """``overlapped``, or ``async s<=1`` with the staleness bound (and ``q64`` for a queue size given)."""
        if not schedule_kind(self.schedule).pipelined:
            return self.schedule
        queue = f" q{self.queue_size}" if self.queue_size is not None else ""
        return f"async s<={self.max_staleness}{queue}" + (" partial" if self.partial_rollouts else "")


class SearchSpec(_Cfg):
    """The grid ``rlsim plan`` searches (the product of every list), and what it optimises.

    ``objective``: ``rollouts_per_hour`` (the most) or ``fewest_resources`` (the fewest nodes, then
    units, whose step time meets the config's ``target_step_s``). ``steps``: simulated steps per
    placement (async: updates; the first fills the pipeline and the last drains it, so neither is ranked on).
    ``max_staleness``: the bounds tried for each ``async`` entry of ``schedules``.
    """

    runtimes: list[str] = Field(min_length=1)
    batchers: list[BatcherSpec] = Field(min_length=1)
    scoring_shares: list[float] = Field(default=[0.25], min_length=1)
    replicas_per_node: list[int] = Field(default=[1], min_length=1)
    colocated: list[bool] = Field(default=[False, True], min_length=1)
    schedules: list[Schedule] = Field(default=["overlapped"], min_length=1)
    engine_units: list[float | None] = Field(default=[None], min_length=1)
    nodes: list[int | None] = Field(default=[None], min_length=1)
    tp: list[int] = Field(default=[1], min_length=1)
    pp: list[int] = Field(default=[1], min_length=1)
    train_nodes: list[int] = Field(default=[0], min_length=1)
    max_staleness: list[int] = Field(default=[1], min_length=1, description="async only: bounds to try")
    objective: Literal["rollouts_per_hour", "fewest_resources"] = "rollouts_per_hour"
    steps: int = Field(default=3, ge=1)
    max_placements: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _check(self) -> SearchSpec:
        if any(not 0 <= s <= 1 for s in self.scoring_shares):
            raise ValueError("scoring_shares must lie in [0, 1] (share of each node's units for scoring)")
        if any(s < 0 for s in self.max_staleness):
            raise ValueError("max_staleness values must be >= 0 (policy versions a trained rollout may lag)")
        return self


class SimulationSpec(_Cfg):
    """``steps`` simulated steps of the chosen plan; ``noise`` draws scorer latencies around the fit."""

    steps: int = Field(default=10, ge=1)
    seed: int = 0
    noise: bool = True


class TrainerSpec(_Cfg):
    """How the update cuts the batch (``rlsim run``'s ``trainer`` keys of the same names): ``micro_batch``
    sequences per forward/backward, ``mini_batch_size`` rollouts per optimizer step (None: one step on
    the whole batch), ``epochs``. Priced from the profile's ``roles`` section (``sim/update_steps.py``)."""

    micro_batch: int = Field(default=16, ge=1)
    mini_batch_size: int | None = Field(default=None, ge=1)
    epochs: int = Field(default=1, ge=1)


class PlanConfig(_Cfg):
    """The whole ``rlsim plan`` input. ``profiles`` maps a hardware kind to a profile JSON path.

    ``target_step_s``: the step time a plan must meet (seconds); with a search it also makes the
    objective ``fewest_resources`` unless the search names another.
    """

    name: str = "plan"
    target_step_s: float | None = Field(default=None, gt=0)
    nodes: NodeSpec
    profiles: dict[str, str] = Field(min_length=1)
    workload: Workload
    placement: PlacementSpec | None = None
    search: SearchSpec | None = None
    simulation: SimulationSpec = SimulationSpec()
    trainer: TrainerSpec = TrainerSpec()

    @model_validator(mode="after")
    def _check(self) -> PlanConfig:
        if self.nodes.kind not in self.profiles:
            raise ValueError(
                f"nodes.kind {self.nodes.kind!r} has no entry in profiles "
                f"(it has: {', '.join(sorted(self.profiles))}); add `{self.nodes.kind}: PATH`"
            )
        if self.placement is None and self.search is None:
            raise ValueError("give a placement to evaluate, a search grid, or both")
        if self.search and self.search.objective == "fewest_resources" and self.target_step_s is None:
            raise ValueError("search.objective fewest_resources needs target_step_s (seconds) or --target-step-s")
        batch = self.workload.rollouts_per_step
        size = self.trainer.mini_batch_size
        if size is not None and batch % size:
            raise ValueError(
                f"trainer.mini_batch_size {size} does not divide the batch of {batch} rollouts "
                "(workload.prompts_per_step x group_size); pick a divisor, as rlsim run requires"
            )
        queue = (
            self.placement.queue_size if self.placement and schedule_kind(self.placement.schedule).pipelined else None
        )
        if queue is not None and queue < batch:
            raise ValueError(
                f"placement.queue_size {queue} rollouts cannot hold one training batch (workload.prompts_per_step "
                f"x group_size = {batch}); raise it to at least {batch} or leave it out"
            )
        return self


def load_plan_config(
    path: str | Path, overrides: Sequence[str] = (), target_step_s: float | None = None
) -> tuple[PlanConfig, Path]:
    """Validate the YAML at ``path`` (with ``--set`` overrides); returns it and the profile's path.

    ``target_step_s`` (``--target-step-s``) sets the target and, for a search that does not name
    its objective, makes it ``fewest_resources``.
    """
    data = apply_overrides(load_yaml(path), overrides)
    if target_step_s is not None:
        data["target_step_s"] = target_step_s
        search = data.get("search")
        if isinstance(search, dict):
            search.setdefault("objective", "fewest_resources")
    config = validate(PlanConfig, data, source=str(path))
    profile_path = Path(config.profiles[config.nodes.kind])
    if not profile_path.is_absolute():
        profile_path = Path(path).resolve().parent / profile_path
    return config, profile_path
