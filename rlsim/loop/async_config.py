"""The ``async`` section of a run config (``schedule: async``) and the rules it must meet before anything starts.

``max_staleness``: how many policy versions a trained rollout may lag (0: every trained rollout came from
the weights being updated). ``queue_size``: scored rollouts buffered for the trainer (None: one batch per
allowed version of lag plus one, i.e. ``(max_staleness + 1) x prompts_per_step x group_size``).
``partial_rollouts``: generations in flight continue under new weights (AReaL, PipelineRL); not offered
yet, and refused with the reason (the README says what it would take). ``is_cap``: the truncation of
the importance weight between the trainer's policy before the update and the behaviour policy that
generated a token (rlsim.algorithms.off_policy).
``checkpoint``: the trainer saves its weights, optimizer state and policy version into ``--out`` after
every update (a ``checkpoint`` event on its lane), so ``--resume`` continues from that exact policy.

Numbers are checked here rather than by pydantic bounds, so that every problem of a config is reported
in one ``ConfigError`` together with the cross-field ones.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from pydantic import BaseModel, ConfigDict


class AsyncConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_staleness: int = 1
    queue_size: int | None = None
    partial_rollouts: bool = False
    is_cap: float = 2.0
    checkpoint: bool = True

    def resolved_queue_size(self, batch: int) -> int:
        """Rollouts the buffer holds (``batch``: rollouts per training batch)."""
        return self.queue_size if self.queue_size is not None else (max(self.max_staleness, 0) + 1) * batch


def async_problems(config: Any) -> list[str]:
    """Problems of ``config.async_`` (a ``RunConfig``); empty unless ``schedule: async`` is wrong somewhere."""
    if config.schedule != "async":
        return []
    a: AsyncConfig = config.async_
    batch = config.workload.prompts_per_step * config.workload.group_size
    problems = []
    if a.max_staleness < 0:
        problems.append(
            f"async.max_staleness: {a.max_staleness} is negative; it counts policy versions a trained "
            "rollout may lag (0: on-policy, 1: one-step off-policy)"
        )
    if a.queue_size is not None and a.queue_size < batch:
        problems.append(
            f"async.queue_size: {a.queue_size} rollouts cannot hold one training batch (workload."
            f"prompts_per_step x group_size = {batch}); raise it to at least {batch}"
        )
    if a.partial_rollouts:
        problems.append(
            "async.partial_rollouts: not supported: the rollout actor runs one call at a time, so new "
            "weights reach vLLM only after its current generate call (the engine pauses for the reload, "
            "recorded as weight_sync_pause_s); generations cannot yet switch weights between engine steps "
            "(README, 'Why no partial rollouts'); set it to false"
        )
    if not a.is_cap >= 1.0:
        problems.append(
            f"async.is_cap: {a.is_cap} is below 1; the importance weight is truncated at is_cap, and a "
            "cap below 1 would down-weight on-policy tokens"
        )
    if config.trainer.algorithm == "ppo" or config.kl.coef > 0:
        problems.append(
            f"schedule: async trains without a critic or a reference (trainer.algorithm: "
            f"{config.trainer.algorithm}, kl.coef: {config.kl.coef}): its pipeline has no value or reference "
            "stage yet; use trainer.algorithm grpo or rloo with kl.coef 0, or a sync schedule for PPO"
        )
    problem = _behaviour_logprob_problem(config.policy.backend)
    if problem:
        problems.append(problem)
    return problems


def _behaviour_logprob_problem(backend: str) -> str | None:
    """Async training corrects for the lag with the behaviour log-probs: the generator must report them."""
    import rlsim.rollout.hf_generator  # noqa: F401
    import rlsim.rollout.vllm_generator  # noqa: F401
    from rlsim.rollout.generator import GENERATORS, make_generator  # noqa: F401  (the registry is filled lazily)

    name = backend
    if backend == "auto":
        name = "vllm" if importlib.util.find_spec("vllm") is not None else "hf"
    if name in GENERATORS and GENERATORS.info(name).behaviour_logprobs:
        return None
    able = [e.name for e in GENERATORS.entries() if e.info.behaviour_logprobs]
    return (
        f"policy.backend: schedule async needs the behaviour log-probs of every generated token, and the "
        f"{name} backend{' (what auto picks here)' if backend == 'auto' else ''} cannot report them; "
        f"use {', '.join(able) or 'a backend that can'}"
    )
