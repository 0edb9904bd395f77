"""The RLHF workload of one step: prompts, G samples per prompt, and token-length distributions.

The length distributions are ``rlsim.workloads``' own (``{kind: fixed, tokens}``, ``{kind: uniform,
min, max}``, ``{kind: lognormal, mean, sigma, min, max}``), so the simulation draws and rounds lengths
exactly as the real loop does, and a loop config's workload carries over unchanged.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.workloads import FixedLengths, LengthDist, LognormalLengths

__all__ = ["LengthDist", "Workload"]


class Workload(BaseModel):
    """``prompts_per_step`` prompts, each sampled ``group_size`` times (GRPO groups) per step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompts_per_step: int = Field(ge=1)
    group_size: int = Field(default=1, ge=1)
    prompt_tokens: LengthDist = FixedLengths(tokens=128)
    response_tokens: LengthDist
    algorithm: Literal["grpo", "rloo", "ppo"] = Field(
        default="grpo", description="ppo adds the critic and the reference (planned for loop configs only)"
    )

    @model_validator(mode="after")
    def _mean_within_range(self) -> Workload:
        # A lognormal's max defaults to the loop's 512 tokens: a longer mean would be clipped to a
        # constant without a word, and the plan would describe another workload than the one meant.
        for name in ("prompt_tokens", "response_tokens"):
            dist = getattr(self, name)
            if isinstance(dist, LognormalLengths) and dist.mean > dist.max:
                raise ValueError(
                    f"{name}: mean {dist.mean:g} is above max {dist.max} tokens (max defaults to "
                    "512); raise max or lower the mean"
                )
        return self

    @property
    def rollouts_per_step(self) -> int:
        return self.prompts_per_step * self.group_size

    def sample_step(self, seed: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Prompt and response lengths of every rollout of ``step``: two int64 arrays ``(rollouts,)``.

        A group shares its prompt, so prompt lengths repeat ``group_size`` times. The same
        ``(seed, step)`` always gives the same draw.
        """
        rng = np.random.default_rng([seed, step])
        prompts = np.repeat(self.prompt_tokens.sample(rng, self.prompts_per_step), self.group_size)
        responses = self.response_tokens.sample(rng, self.rollouts_per_step)
        return prompts, responses
