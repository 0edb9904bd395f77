"""``predict_step``: the planner's prediction for one real-loop configuration (for ``rlsim plan validate``).

``LoopKnobs`` carries the knobs of ``rlsim run``'s config (``rlsim.loop.config.RunConfig``): the
workload, schedule (``async`` with its staleness bound and queue) and micro-batch, the ``shared`` /
``split`` placement presets over a pool of cores, the scorer runtime, replicas, batcher and truncation,
and PPO's reference and critic with their micro-batches and colocation groups. ``knobs_from_run_config``
reads them from a ``RunConfig``, so a validation run hands the very same config to the loop and to the
simulation. The simulation then uses the loop's own dispatch (micro-batches dealt to the scoring
replicas in turn; in ``split`` the trainer shares the scorers' cores, as ``rlsim.placement`` does).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.errors import RlsimError
from rlsim.placement import ALL_ROLES, active_roles, split_pool
from rlsim.planner.profile.scaling import RULE_BASED
from rlsim.planner.profile.schema import Profile
from rlsim.planner.sim.evaluate import Evaluation, evaluate
from rlsim.planner.sim.ppo_roles import RolesSpec
from rlsim.planner.sim.update_steps import UpdateShape
from rlsim.planner.spec.cluster import BatcherSpec, NodeSpec, PlacementSpec, Schedule
from rlsim.planner.spec.workload import Workload
from rlsim.rollout.prompts import make_step_requests
from rlsim.schedule_kinds import schedule_kind
from rlsim.workloads import FixedLengths, LengthDist

if TYPE_CHECKING:
    from rlsim.loop.config import RunConfig


class LoopKnobs(BaseModel):
    """One loop configuration on one machine of ``cores`` cores. ``scoring_cores``: what the scorers
    (and the trainer) get under ``split``; ``shared`` puts every actor on all ``cores``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompts_per_step: int = Field(ge=1)
    group_size: int = Field(default=1, ge=1)
    prompt_tokens: LengthDist = FixedLengths(tokens=64)
    response_tokens: LengthDist
    schedule: Schedule = "sequential"
    micro_batch: int = Field(default=8, ge=1, description="overlapped: rollouts per call to a scorer")
    placement: Literal["shared", "split"] = "shared"
    cores: int = Field(ge=1)
    gpus: int = Field(default=0, ge=0)
    scoring_cores: int | None = Field(default=None, ge=1)
    runtime: str
    batcher: BatcherSpec
    scorer_replicas: int = Field(default=1, ge=1)
    pool_workers: int | None = Field(default=None, ge=1, description="a rule-based reward: workers per scoring actor")
    max_length: int | None = Field(default=None, ge=1, description="reward-model truncation (tokens)")
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_staleness: int = Field(default=1, ge=0, description="async: policy versions a trained rollout may lag")
    queue_size: int | None = Field(default=None, ge=1, description="async: scored rollouts buffered (rollouts)")
    partial_rollouts: bool = Field(default=False, description="async: weights load between engine steps")
    steps: int = Field(default=10, ge=1)
    seed: int = 0
    # PPO's roles (sim/ppo_roles.py): the reference runs when kl.coef > 0, the critic for ppo.
    reference_runtime: str | None = Field(default=None, description="the reference's runtime; None: no KL")
    critic: bool = False
    reference_micro_batch: int = Field(default=16, ge=1)
    critic_micro_batch: int = Field(default=16, ge=1)
    trainer_micro_batch: int = Field(default=16, ge=1)
    mini_batch_size: int | None = Field(default=None, ge=1, description="trainer.mini_batch_size (None: one step)")
    epochs: int = Field(default=1, ge=1, description="trainer.epochs")
    colocate: list[list[str]] = Field(default_factory=list, description="placement.colocate groups")

    @model_validator(mode="after")
    def _check(self) -> LoopKnobs:
        if self.placement == "split" and self.scoring_cores is None:
            raise ValueError("the split placement needs scoring_cores (cores the scorers get)")
        return self


def knobs_from_run_config(config: RunConfig, cores: int | None = None) -> LoopKnobs:
    """The knobs of an ``rlsim run`` config. ``cores``: the pool size when the config leaves it unset
    (default: the cores this process may run on, as the loop itself would use)."""
    spec = config.workload.spec
    if spec.path is not None:
        raise RlsimError(
            "predict_step needs a synthetic workload (prompt/response length distributions); "
            f"{spec.path} is a file workload, whose lengths the planner cannot know"
        )
    _check_presets_only(config)
    pool = len(config.placement.pool) if config.placement.pool else (cores or len(os.sched_getaffinity(0)))
    reward = config.reward
    workers = int(reward.options()["workers"]) if reward.runtime in RULE_BASED else None
    window = config.micro_batch if schedule_kind(config.schedule).streams else 128
    batcher = BatcherSpec(
        kind=reward.batcher,
        batch_size=reward.batch_size,  # type: ignore[arg-type]
        token_budget=reward.token_budget,
        window=window,
    )
    roles = active_roles(config.trainer.algorithm, config.kl.coef)
    return LoopKnobs(
        prompts_per_step=config.workload.prompts_per_step,
        group_size=config.workload.group_size,
        prompt_tokens=spec.prompt,
        response_tokens=spec.response,
        schedule=config.schedule,
        micro_batch=config.micro_batch,
        placement=config.placement.preset,
        cores=pool,
        gpus=1 if config.policy.device == "cuda" else 0,
        scoring_cores=len(split_pool(range(pool))[1]) if config.placement.preset == "split" else None,
        runtime=reward.runtime,
        batcher=batcher,
        # a rule-based reward's replicas are its worker processes: `workers` in each of its scoring actors
        scorer_replicas=reward.replicas * workers if workers else reward.replicas,
        pool_workers=workers,
        max_length=reward.max_length,
        max_staleness=config.async_.max_staleness,
        queue_size=config.async_.resolved_queue_size(config.workload.prompts_per_step * config.workload.group_size),
        partial_rollouts=config.async_.partial_rollouts,
        steps=config.steps,
        seed=config.seed,
        reference_runtime=config.reference.runtime if "reference" in roles else None,
        critic="critic" in roles,
        reference_micro_batch=config.reference.micro_batch,
        critic_micro_batch=config.critic.micro_batch,
        trainer_micro_batch=config.trainer.micro_batch,
        mini_batch_size=config.trainer.mini_batch_size,
        epochs=config.trainer.epochs,
        colocate=config.placement.colocate,
    )


def _check_presets_only(config: RunConfig) -> None:
    """RlsimError when a role's cores or threads are set by hand: the planner places the roles as the
    ``shared`` and ``split`` presets do (one thread per core), and would otherwise predict another run."""
    placement = config.placement
    custom = [
        f"placement.{role}.{key}={value}"
        for role in ALL_ROLES
        for key, value in (("cores", getattr(placement, role).cores), ("threads", getattr(placement, role).threads))
        if value is not None
    ]
    if custom:
        raise RlsimError(
            f"the planner cannot predict {', '.join(custom)}: it places every role as placement.preset "
            f"{placement.preset!r} does (one thread per core); leave the roles' cores and threads to the preset, "
            "or measure that placement with rlsim run"
        )


class ReplayWorkload(Workload):
    """Given steps' lengths replayed in order: simulated step ``i`` gets ``trace[i]`` (prompt and
    response tokens per rollout), instead of a fresh draw from the distributions."""

    trace: list[tuple[list[int], list[int]]] = Field(min_length=1)

    def sample_step(self, seed: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        prompts, responses = self.trace[step % len(self.trace)]
        return np.asarray(prompts, dtype=np.int64), np.asarray(responses, dtype=np.int64)


def loop_trace(config: RunConfig, steps: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Per loop step (numbered from 1) the prompt and response lengths ``rlsim run`` will request.

    The loop draws each step's requests from seeds derived from ``(workload.seed, step)``, so they are
    known before it runs. Prompt tokens are counted as words: synthetic prompts are single-token words.
    """
    w = config.workload
    out = []
    for step in steps:
        requests = make_step_requests(w.spec, step, w.prompts_per_step, w.group_size)
        out.append(([len(r.prompt.split()) for r in requests], [r.response_tokens for r in requests]))
    return out


def case_profile(profile: Profile, runtime: str, entry: str | None) -> Profile:
    """``profile`` with its ``entry`` (a judge's or a verifier's own name, ``profile_runtime`` of a loop set)
    standing for the loop's reward ``runtime``; ``profile`` itself when ``entry`` is None. An RlsimError names
    the profile's entries when it has none of that name."""
    if entry is None or entry == runtime:
        return profile
    if entry in profile.reward_functions:
        return profile.model_copy(
            update={"reward_functions": {**profile.reward_functions, runtime: profile.reward_functions[entry]}}
        )
    if entry in profile.runtimes:
        return profile.model_copy(update={"runtimes": {**profile.runtimes, runtime: profile.runtimes[entry]}})
    have = ", ".join(sorted([*profile.runtimes, *profile.reward_functions]))
    raise RlsimError(f"profile_runtime {entry!r} is not an entry of the profile (it has: {have})")


def predict_step(
    config: LoopKnobs | RunConfig, profile: Profile, noise: bool = False, replay: Sequence[int] | None = None
) -> Evaluation:
    """Simulate the steps of a loop configuration; ``.time_s`` has the loop's breakdown.

    ``noise`` is off by default: a validation compares the *expected* step time with the measured one.
    ``replay`` (a ``RunConfig`` only): simulate exactly these loop steps (numbered from 1) with the
    lengths the loop draws for them, rather than ``steps`` fresh draws from the length distributions.
    """
    if replay is not None and not isinstance(config, LoopKnobs):
        if schedule_kind(config.schedule).pipelined:
            return predict_async_run(config, profile, noise)
        return predict_trace(config, profile, loop_trace(config, replay), noise)
    knobs = config if isinstance(config, LoopKnobs) else knobs_from_run_config(config)
    return _evaluate(knobs, profile, noise, None)


def predict_trace(
    config: RunConfig, profile: Profile, trace: list[tuple[list[int], list[int]]], noise: bool = False
) -> Evaluation:
    """Simulate one step per ``trace`` entry (prompt and response tokens per rollout, see ``loop_trace``)."""
    knobs = knobs_from_run_config(config)
    workload = ReplayWorkload(
        prompts_per_step=knobs.prompts_per_step,
        group_size=knobs.group_size,
        response_tokens=knobs.response_tokens,
        trace=trace,
    )
    return _evaluate(knobs.model_copy(update={"steps": len(trace)}), profile, noise, workload)


def predict_async_run(config: RunConfig, profile: Profile, noise: bool = False) -> Evaluation:
    """The whole async run of ``config``, its steps numbered 1 .. ``steps`` as the loop numbers them, with
    the lengths the loop draws: its batch ``k`` takes step ``k + 1``'s requests
    (``loop.schedules.asynchronous.session``). Twice the run's batches are traced, enough for the ones a run
    that drops stale groups generates on top."""
    knobs = knobs_from_run_config(config)
    workload = ReplayWorkload(
        prompts_per_step=knobs.prompts_per_step,
        group_size=knobs.group_size,
        response_tokens=knobs.response_tokens,
        trace=loop_trace(config, range(1, 2 * knobs.steps + 1)),
    )
    return _evaluate(knobs, profile, noise, workload)


def _evaluate(knobs: LoopKnobs, profile: Profile, noise: bool, workload: Workload | None) -> Evaluation:
    node = NodeSpec(count=1, cores=knobs.cores, gpus=knobs.gpus, kind=profile.hardware_kind)
    split = knobs.placement == "split"
    spec = PlacementSpec(
        schedule=knobs.schedule,
        colocated=not split,
        runtime=knobs.runtime,
        batcher=knobs.batcher.model_copy(update={"window": knobs.micro_batch}),
        scoring_share=min((knobs.scoring_cores or 0) / knobs.cores, 1.0),
        replicas_per_node=knobs.scorer_replicas,
        pool_workers=knobs.pool_workers,
        max_running=knobs.max_num_seqs,
        dispatch="round_robin",
        train_on="scoring" if split else "generation",
        max_length=knobs.max_length,
        max_staleness=knobs.max_staleness,
        queue_size=knobs.queue_size,
        partial_rollouts=knobs.partial_rollouts,
    )
    workload = workload or Workload(
        prompts_per_step=knobs.prompts_per_step,
        group_size=knobs.group_size,
        prompt_tokens=knobs.prompt_tokens,
        response_tokens=knobs.response_tokens,
    )
    update = UpdateShape(knobs.trainer_micro_batch, knobs.mini_batch_size, knobs.epochs)
    return evaluate(
        node, profile, workload, spec, knobs.steps, seed=knobs.seed, noise=noise, roles=_roles(knobs), update=update
    )


def _roles(knobs: LoopKnobs) -> RolesSpec | None:
    """The reference and critic the loop starts for these knobs (None: a GRPO step without a KL)."""
    if knobs.reference_runtime is None and not knobs.critic:
        return None
    return RolesSpec(
        reference_runtime=knobs.reference_runtime,
        critic=knobs.critic,
        micro_batch=knobs.micro_batch,
        reference_micro_batch=knobs.reference_micro_batch,
        critic_micro_batch=knobs.critic_micro_batch,
        trainer_micro_batch=knobs.trainer_micro_batch,
        colocate=tuple(tuple(g) for g in knobs.colocate),
    )
