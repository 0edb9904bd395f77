"""The RLHF workload of one step: prompts, G samples per prompt, and token-length distributions."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator


class LengthDist(BaseModel):
    """Token lengths: ``fixed`` (always ``mean``), ``uniform`` (min..max) or ``lognormal`` (mean, sigma).

    Lognormal lengths use ``mu = ln(mean) - sigma**2 / 2`` so the mean before clipping is ``mean``;
    every draw is clipped to ``[min, max]`` and rounded to whole tokens.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["fixed", "uniform", "lognormal"] = "lognormal"
    mean: float = Field(gt=0, description="tokens")
    sigma: float = Field(default=0.6, ge=0)
    min: int = Field(default=1, ge=1)
    max: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check_range(self) -> "LengthDist":
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min}); raise max or lower min")
        if self.kind == "uniform" and self.max is None:
            raise ValueError("a uniform length distribution needs max (tokens)")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths in tokens, int64 array of shape ``(n,)``."""
        if self.kind == "fixed":
            raw = np.full(n, self.mean)
        elif self.kind == "uniform":
            raw = rng.uniform(self.min, float(self.max) + 1.0, size=n)
        else:
            mu = np.log(self.mean) - self.sigma**2 / 2.0
            raw = rng.lognormal(mu, self.sigma, size=n)
        upper = self.max if self.max is not None else np.inf
        return np.clip(np.floor(raw + (0.5 if self.kind != "uniform" else 0.0)), self.min, upper).astype(np.int64)


class Workload(BaseModel):
    """``prompts_per_step`` prompts, each sampled ``group_size`` times (GRPO groups) per step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompts_per_step: int = Field(ge=1)
    group_size: int = Field(default=1, ge=1)
    prompt_tokens: LengthDist = LengthDist(kind="fixed", mean=128)
    response_tokens: LengthDist

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
