"""The ``async`` section of a run config (``schedule: async``) and the rules it must meet before anything starts.

``max_staleness``: how many policy versions a trained rollout may lag (0: every trained rollout came from
the weights being updated). ``queue_size``: scored rollouts buffered for the trainer (None: one batch per
allowed version of lag plus one, i.e. ``(max_staleness + 1) x prompts_per_step x group_size``).
``partial_rollouts``: generations in flight take new weights between engine steps and continue under
them, recording both versions (AReaL's interruptible generation: abort, reload, resubmit prompt + the
tokens sampled so far); needs a backend that can (vLLM). ``is_cap`` / ``is_floor``: the bounds of
the importance weight between the trainer's policy before the update and the behaviour policy that
generated a token; ``is_level``: a weight per ``token`` or one per rollout (``sequence``, the product
of its token ratios); ``is_mode``: ``truncate`` into the bounds or ``mask`` (weight 0) outside them
(rlsim.algorithms.off_policy).
``checkpoint``: the trainer saves its weights, optimizer state and policy version into ``--out`` after
every update (a ``checkpoint`` event on its lane), so ``--resume`` continues from that exact policy.

Numbers are checked here rather than by pydantic bounds, so that every problem of a config is reported
in one ``ConfigError`` together with the cross-field ones.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from pydantic import BaseModel, ConfigDict

from rlsim.algorithms.off_policy import IsLevel, IsMode
from rlsim.rollout.generator import GENERATORS
from rlsim.schedule_kinds import SCHEDULES, schedule_kind


class AsyncConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_staleness: int = 1
    queue_size: int | None = None
    partial_rollouts: bool = False
    is_cap: float = 2.0
    is_floor: float | None = (
        None  # a lower bound on the weight (OpenRLHF: 0.5); rlsim.loop.config.conventions checks it
    )
    is_level: IsLevel = "token"
    is_mode: IsMode = "truncate"
    checkpoint: bool = True

    def resolved_queue_size(self, batch: int) -> int:
        """Rollouts the buffer holds (``batch``: rollouts per training batch)."""
        return self.queue_size if self.queue_size is not None else (max(self.max_staleness, 0) + 1) * batch


def async_problems(config: Any) -> list[str]:
    """Problems of ``config.async_`` (a ``RunConfig``); empty unless ``schedule: async`` is wrong somewhere."""
    kind = schedule_kind(config.schedule)
    if not kind.pipelined:
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
    if a.partial_rollouts and config.trainer.sync == "simulated":
        problems.append(
            "async.partial_rollouts: trainer.sync simulated has no weights to load between engine steps; "
            "use trainer.sync reload, or set async.partial_rollouts false"
        )
    if not a.is_cap >= 1.0:
        problems.append(
            f"async.is_cap: {a.is_cap} is below 1; the importance weight is truncated at is_cap, and a "
            "cap below 1 would down-weight on-policy tokens"
        )
    problems += _role_problems(config)
    if kind.behaviour_logprobs:
        problems += _backend_problems(config.policy.backend, a.partial_rollouts and kind.weight_swap_mid_call)
    return problems


def _role_problems(config: Any) -> list[str]:
    """The algorithm and KL penalty must be ones the schedule's pipeline can train."""
    kind = schedule_kind(config.schedule)
    algorithm, kl = config.trainer.algorithm, config.kl.coef
    if algorithm in kind.algorithms and (kl <= 0 or kind.experience_roles):
        return []
    others = [k.name for k in SCHEDULES.values() if algorithm in k.algorithms and k.experience_roles]
    return [
        f"schedule: {kind.name} trains without a critic or a reference (trainer.algorithm: {algorithm}, "
        f"kl.coef: {kl}): its pipeline has no value or reference stage yet; use trainer.algorithm "
        f"{' or '.join(kind.algorithms)} with kl.coef 0, or schedule {' or '.join(others)} for {algorithm}"
    ]


def _backend_problems(backend: str, partial: bool) -> list[str]:
    """Async training corrects for the lag with the behaviour log-probs: the generator must report them;
    partial rollouts also need it to take new weights between engine steps."""
    name = backend
    if backend == "auto":
        name = "vllm" if importlib.util.find_spec("vllm") is not None else "hf"
    info = GENERATORS.info(name) if name in GENERATORS else None
    picked = f"the {name} backend{' (what auto picks here)' if backend == 'auto' else ''}"
    problems = []
    if info is None or not info.behaviour_logprobs:
        able = [e.name for e in GENERATORS.entries() if e.info.behaviour_logprobs]
        problems.append(
            f"policy.backend: schedule async needs the behaviour log-probs of every generated token, and "
            f"{picked} cannot report them; use {', '.join(able) or 'a backend that can'}"
        )
    if partial and (info is None or not info.weight_swap):
        able = [e.name for e in GENERATORS.entries() if e.info.weight_swap]
        problems.append(
            f"async.partial_rollouts: {picked} cannot load new weights between its engine steps; use "
            f"{', '.join(able) or 'a backend that can'}, or set async.partial_rollouts false"
        )
    return problems
