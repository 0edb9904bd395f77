"""Picklable factories that build each role's inner object inside its actor process from the config.

Models are resolved by name inside the actor (``resolve_policy`` / ``resolve_reward_model`` build
or find them in the local cache), so a config that names ``tiny-llama`` works on every node of a
cluster without shipping folders around.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import partial
from typing import Any

from rlsim.loop.config import RunConfig
from rlsim.loop.config.algorithm import algorithm_settings, critic_settings, reference_settings
from rlsim.loop.roles.critic import CriticModel
from rlsim.loop.roles.reference import make_reference
from rlsim.loop.roles.reward_stage import RewardStage, RewardStageSettings
from rlsim.loop.roles.trainer import PolicyTrainer, TrainerSettings
from rlsim.models import resolve_policy
from rlsim.placement import ResolvedPlacement
from rlsim.rollout.generator import GeneratorSettings, make_generator
from rlsim.rollout.prompts import max_response_tokens
from rlsim.schedule_kinds import schedule_kind


def generator_settings(config: RunConfig, placement: ResolvedPlacement) -> GeneratorSettings:
    p = config.policy
    return GeneratorSettings(
        device=p.device,
        dtype=p.dtype,
        max_model_len=p.max_model_len,
        enforce_eager=p.enforce_eager,
        engine_inline=p.engine_process == "inline",
        kv_cache_gib=p.kv_cache_gib,
        gpu_memory_fraction=placement.gpu or 0.5,
        seed=config.seed,
        temperature=p.temperature,
        top_p=p.top_p,
        cores=placement.cores,
        threads=placement.threads,
        behaviour_logprobs=schedule_kind(config.schedule).behaviour_logprobs,
    )


def reward_settings(config: RunConfig, placement: ResolvedPlacement) -> RewardStageSettings:
    r = config.reward
    return RewardStageSettings(
        runtime=r.runtime,
        model=r.model,
        batcher=r.batcher,
        batch_size=r.batch_size,
        token_budget=r.token_budget,
        max_length=r.max_length,
        device=r.device,
        threads=placement.threads,
        spinning=r.spinning,
        engine_inline=r.engine_process == "inline",
        server_runtime=r.server_runtime,
        http_deadline_s=r.http_deadline_s,
        imports=tuple(r.imports),
        http_protocol=r.http_protocol,
        int8_calibration=r.int8_calibration,
        int8_smooth_alpha=r.int8_smooth_alpha,
        url=r.url,
        options=r.options(),
    )


def trainer_settings(config: RunConfig, placement: ResolvedPlacement) -> TrainerSettings:
    t = config.trainer
    off_policy = schedule_kind(config.schedule).behaviour_logprobs  # corrected with the generator's log-probs
    return TrainerSettings(
        lr=t.lr,
        clip_eps=t.clip_eps,
        epochs=t.epochs,
        micro_batch=t.micro_batch,
        max_grad_norm=t.max_grad_norm,
        device=t.device,
        threads=placement.threads,
        seed=config.seed,
        algorithm=algorithm_settings(config),
        is_cap=config.async_.is_cap if off_policy else None,
        is_floor=config.async_.is_floor if off_policy else None,
        is_level=config.async_.is_level,
        is_mode=config.async_.is_mode,
        clip_eps_high=t.clip_eps_high,
        dual_clip=t.dual_clip,
        delta_clip=t.delta_clip,
        log_ratio_clamp=t.log_ratio_clamp,
        loss_agg=t.loss_agg,
        loss_scale=loss_scale(config),
        mini_batch_size=t.mini_batch_size,
    )


def loss_scale(config: RunConfig) -> float | None:
    """``trainer.loss_scale``, or for ``seq-mean-token-sum-norm`` without one the workload's longest
    response in tokens (TRL's ``dr_grpo`` divides by ``max_completion_length``)."""
    t = config.trainer
    if t.loss_scale is not None or t.loss_agg != "seq-mean-token-sum-norm":
        return t.loss_scale
    return float(max_response_tokens(config.workload.spec))


def build_generator(backend: str, policy: str, settings: GeneratorSettings) -> Any:
    if backend == "auto":
        backend = "vllm" if _importable("vllm") else "hf"
    return make_generator(backend, resolve_policy(policy), settings)


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def build_reward_stage(policy: str, settings: RewardStageSettings) -> Any:
    return RewardStage(resolve_policy(policy), settings)


def build_trainer(policy: str, settings: TrainerSettings) -> Any:
    return PolicyTrainer(resolve_policy(policy), settings)


def build_reference(policy: str, settings: Any) -> Any:
    return make_reference(resolve_policy(policy), settings)


def build_critic(source: str, settings: Any) -> Any:
    return CriticModel(resolve_policy(source), settings)


def factories(config: RunConfig, placements: dict[str, ResolvedPlacement]) -> dict[str, Callable[[], Any]]:
    """role -> zero-argument factory, safe to send to another process; the reference and the critic only
    where ``placements`` has them (the run needs them)."""
    policy = config.policy.model
    out: dict[str, Callable[[], Any]] = {
        "rollout": partial(
            build_generator, config.policy.backend, policy, generator_settings(config, placements["rollout"])
        ),
        "scorer": partial(build_reward_stage, policy, reward_settings(config, placements["scorer"])),
        "trainer": partial(build_trainer, policy, trainer_settings(config, placements["trainer"])),
    }
    if "reference" in placements:
        out["reference"] = partial(build_reference, policy, reference_settings(config, placements["reference"].threads))
    if "critic" in placements:
        out["critic"] = partial(
            build_critic, config.critic.model or policy, critic_settings(config, placements["critic"].threads)
        )
    return out
