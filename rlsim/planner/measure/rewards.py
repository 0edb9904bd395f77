"""Time the rewards that are no reward model for the profile (``rewards:`` in a profile YAML).

A rule-based reward (runtime ``function`` or ``sandbox``) becomes a ``reward_functions`` entry: one worker's
service time per rollout, timed call by call (one rollout a call, one worker, so the pool's queueing is left to
the simulation: ``rlsim.planner.sim.reward_pool``) after ``warmup`` calls, summarised as a lognormal of the
samples' mean and coefficient of variation; the samples are kept. The responses are spread over the profile's
``lengths`` (a sandbox picks its bank program by the response's length). A ``function`` is timed on
arithmetic problems (``What is 3/4 + 5/6?``, the response ending in an answer, right every other time), so
rlsim's math checker does its whole work (parse, sympy); rlsim's own loop prompts hold no problem, where it
returns 0 in about a tenth of a millisecond.

A judge (runtime ``genrm``) batches like a reward model: it is timed on the profile's scorer grid and becomes a
``runtimes`` entry under its name (``rlsim.planner.measure.scorers.measure_runtime``), its tokens counted as the
rollout's (prompt and response, what the planner feeds a latency model), so the template's own tokens and the
decoding of ``score`` mode land in the per-call and per-sequence terms.

Like ``measure.scorers``, it is imported only by ``rlsim profile`` (``build_profile``), never by ``rlsim plan``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.errors import ConfigError
from rlsim.models import resolve_reward_model
from rlsim.planner.measure.scorers import synthetic_text
from rlsim.planner.profile.scaling import RULE_BASED, RewardFunctionModel
from rlsim.rewards.options import parse_options
from rlsim.scoring.base import ScorerSettings, make_scorer

if TYPE_CHECKING:
    from rlsim.planner.measure.loop_set import QuietGate

QUIET_EVERY = 16  # calls between two waits for idle cores


class RewardTiming(BaseModel):
    """One reward to time: ``runtime`` with ``options`` (its ``reward.<runtime>`` section of a run config);
    ``rollouts``: calls timed (rule-based), ``warmup``: calls before them, not kept."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    runtime: Literal["function", "sandbox", "genrm"]
    options: dict[str, Any] = Field(default_factory=dict)
    rollouts: int = Field(default=32, ge=2, le=100_000)
    warmup: int = Field(default=2, ge=0, le=1000)

    @model_validator(mode="after")
    def _options_valid(self) -> RewardTiming:
        try:
            options = parse_options(self.runtime, self.options)
        except ConfigError as err:
            raise ValueError(
                f"options are not a valid reward.{self.runtime} section: {'; '.join(err.errors)}"
            ) from None
        if self.runtime == "sandbox" and options.program == "response":
            raise ValueError(
                "a sandbox with program: response would run nothing here (the timed responses hold no code); "
                "time the program bank (leave program out)"
            )
        return self

    def context_tokens(self) -> int | None:
        """A judge's context (``max_model_len``): the longest text the planner's model may be fed."""
        return int(parse_options(self.runtime, self.options).max_model_len) if self.runtime == "genrm" else None

    def timing_options(self) -> dict[str, Any]:
        """The options a rule-based reward is timed with: one worker (the plan sets how many)."""
        return {**self.options, "workers": 1} if self.runtime in RULE_BASED else dict(self.options)


def problem_pair(i: int, tokens: int) -> tuple[str, str]:
    """A prompt holding an arithmetic problem and a response of about ``tokens`` words ending in an answer
    (the right one for even ``i``)."""
    a, b, c, d = 1 + i % 7, 2 + i % 5, 1 + i % 3, 3 + i % 4
    right = f"{a * d + c * b}/{b * d}"
    answer = right if i % 2 == 0 else f"{a + c}/{b + d}"
    body = synthetic_text(max(tokens - 8, 1), salt=i)
    return f"What is {a}/{b} + {c}/{d}?", f"{body} so the answer is \\boxed{{{answer}}}"


def response_lengths(lengths: list[int], n: int) -> list[int]:
    """``n`` response lengths (tokens) evenly spread from the shortest to the longest of ``lengths``."""
    return [int(round(x)) for x in np.linspace(min(lengths), max(lengths), n)]


def time_rule_based(
    name: str,
    timing: RewardTiming,
    lengths: list[int],
    on_call: Callable[[str], None] | None = None,
    quiet: QuietGate | None = None,
) -> RewardFunctionModel:
    """Seconds per rollout of one worker of ``timing``'s reward; the model with its samples. ``quiet``: wait for
    idle cores before every ``QUIET_EVERY`` calls (the work runs in child processes, whose CPU time a call cannot
    tell from other programs', so disturbed calls cannot be left out afterwards as scorer calls are)."""
    reward = make_scorer(
        timing.runtime,
        resolve_reward_model("minilm-rm"),  # not used by these rewards; every scorer takes one
        ScorerSettings(device="cpu", threads=1, options=timing.timing_options()),
    )
    pairs = [problem_pair(i, n) for i, n in enumerate(response_lengths(lengths, timing.rollouts))]
    seconds = []
    try:
        for i in range(timing.warmup):
            reward.score_pairs([pairs[i % len(pairs)][0]], [pairs[i % len(pairs)][1]])  # type: ignore[attr-defined]
        for i, (prompt, response) in enumerate(pairs):
            if quiet is not None and i % QUIET_EVERY == 0:
                quiet.wait()
            t0 = time.perf_counter()
            reward.score_pairs([prompt], [response])  # type: ignore[attr-defined]
            seconds.append(time.perf_counter() - t0)
            if on_call:
                on_call(f"{name} ({timing.runtime}) {len(seconds)}/{len(pairs)}")
    finally:
        reward.close()
    return summarise([round(s, 7) for s in seconds], timing.runtime)


def summarise(samples_s: list[float], runtime: str | None) -> RewardFunctionModel:
    """A lognormal of the samples' mean and coefficient of variation, the samples kept."""
    x = np.array(samples_s)
    mean = float(x.mean())
    return RewardFunctionModel(
        mean_s=mean, cv=float(x.std() / mean), distribution="lognormal", runtime=runtime, samples_s=list(samples_s)
    )
