"""``predict_step``: the planner's prediction for one real-loop configuration (for ``plan --validate``).

``LoopKnobs`` carries the knobs a loop config has (issue 4: workload, schedule, the ``shared`` /
``split`` placement presets, cores, scorer runtime, batcher, replicas, vLLM's ``max_num_seqs``), so a
validation run can hand the same settings to the real loop and to the simulation and compare step
times. The machine is one node with ``cores`` cores and ``gpus`` GPUs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.planner.cluster import BatcherSpec, NodeSpec, PlacementSpec, Schedule
from rlsim.planner.evaluate import Evaluation, evaluate
from rlsim.planner.profile import Profile
from rlsim.planner.workload import LengthDist, Workload


class LoopKnobs(BaseModel):
    """One loop configuration. ``scoring_cores``: cores the scorers get under ``split`` (the rest
    generate); ``shared`` puts every actor on all ``cores``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompts_per_step: int = Field(ge=1)
    group_size: int = Field(default=1, ge=1)
    prompt_tokens: LengthDist = LengthDist(kind="fixed", mean=64)
    response_tokens: LengthDist
    schedule: Schedule = "sequential"
    placement: Literal["shared", "split"] = "shared"
    cores: int = Field(ge=1)
    gpus: int = Field(default=0, ge=0)
    scoring_cores: int | None = Field(default=None, ge=1)
    runtime: str
    batcher: BatcherSpec
    scorer_replicas: int = Field(default=1, ge=1)
    max_num_seqs: int | None = Field(default=None, ge=1)
    steps: int = Field(default=10, ge=1)
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> "LoopKnobs":
        if self.placement == "split" and self.scoring_cores is None:
            raise ValueError("the split placement needs scoring_cores (cores the scorers get)")
        return self


def predict_step(knobs: LoopKnobs, profile: Profile, noise: bool = False) -> Evaluation:
    """Simulate ``knobs.steps`` steps of this loop configuration; ``.time_s`` has the loop's breakdown.

    ``noise`` is off by default: a validation compares the *expected* step time with the measured one.
    """
    node = NodeSpec(count=1, cores=knobs.cores, gpus=knobs.gpus, kind=profile.hardware_kind)
    share = (knobs.scoring_cores or 0) / knobs.cores
    spec = PlacementSpec(
        schedule=knobs.schedule, colocated=knobs.placement == "shared", runtime=knobs.runtime,
        batcher=knobs.batcher, scoring_share=min(share, 1.0), replicas_per_node=knobs.scorer_replicas,
        max_running=knobs.max_num_seqs,
    )
    workload = Workload(prompts_per_step=knobs.prompts_per_step, group_size=knobs.group_size,
                        prompt_tokens=knobs.prompt_tokens, response_tokens=knobs.response_tokens)
    return evaluate(node, profile, workload, spec, knobs.steps, seed=knobs.seed, noise=noise)
