"""Config sections of the algorithm's extra models: ``kl``, ``reference`` and ``critic`` (used by
``RunConfig`` in ``rlsim.loop.config``), their cross-field rules, and the settings they turn into.

``trainer.algorithm`` (``grpo`` | ``ppo`` | ``rloo``), ``gamma``, ``lam``, ``value_clip`` and
``critic_lr`` live in ``TrainerConfig``; the rules here read them there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlsim.errors import RlsimError
from rlsim.loop.roles.reference import NATIVE_REFUSED, ReferenceSettings
from rlsim.models.builtin import BUILTIN_POLICIES, TINY_LLAMA
from rlsim.placement import active_roles, colocation_problems
from rlsim.rollout.prompts import max_prompt_tokens, max_response_tokens

if TYPE_CHECKING:
    from rlsim.algorithms.experience import AlgorithmSettings
    from rlsim.loop.config import RunConfig
    from rlsim.loop.roles.critic import CriticSettings
    from rlsim.loop.roles.reference import ReferenceSettings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KlConfig(_Strict):
    """KL to the reference. ``coef`` 0 turns it (and the reference pass) off. ``estimator``: ``k1``
    (log p - log p_ref), ``k2`` ((log p - log p_ref)^2 / 2), ``k3`` ((r - 1) - log r, r = p_ref / p)
    or ``k3+`` (k3's value, k2's gradient). ``target``: ``reward`` (subtracted from the per-token
    rewards) or ``loss`` (``coef`` x the aggregated KL added to the policy loss). ``reward_form``: how
    grpo / rloo put the KL in the reward: ``sequence`` (``coef`` x the summed KL off the score before
    the baseline, one advantage per sequence; verl) or ``token`` (the baseline on the raw score, then
    each token's reward-to-go with ``-coef`` x KL per token; OpenRLHF); ppo's KL is per token either
    way (rlsim.algorithms.experience). ``log_ratio_clamp``:
    on k3's ``log r`` before ``exp``; ``clamp``: on the estimate (None: off; rlsim.algorithms.kl).
    ``controller``: ``fixed`` keeps ``coef``; ``adaptive`` starts at ``coef`` and moves it towards
    ``target_kl`` with ``horizon`` (sequences; rlsim.algorithms.kl_control)."""

    coef: float = Field(0.0, ge=0)
    estimator: Literal["k1", "k2", "k3", "k3+"] = "k3"
    target: Literal["reward", "loss"] = "loss"
    reward_form: Literal["sequence", "token"] = "sequence"
    log_ratio_clamp: float | None = Field(20.0, gt=0)
    clamp: float | None = Field(None, gt=0)
    controller: Literal["fixed", "adaptive"] = "fixed"
    target_kl: float | None = Field(None, gt=0)
    horizon: int = Field(10000, ge=1)


class ReferenceConfig(_Strict):
    """The frozen initial policy. ``runtime``: ``eager`` (torch), ``ort`` (the exported log-prob graph
    in ONNX Runtime); ``native`` is refused with the reason (the engine returns one float per sequence).
    ``micro_batch``: sequences per forward."""

    runtime: Literal["eager", "ort", "native"] = "eager"
    micro_batch: int = Field(16, ge=1)
    device: Literal["cpu", "cuda"] = "cpu"


class CriticConfig(_Strict):
    """The PPO critic: ``model`` None means the policy (its backbone + a value head, as OpenRLHF and
    verl initialise it); a built-in policy name or a causal-LM folder otherwise."""

    model: str | None = None
    micro_batch: int = Field(16, ge=1)
    device: Literal["cpu", "cuda"] = "cpu"


def algorithm_problems(config: RunConfig) -> list[str]:
    """Cross-field rules of the algorithm sections and of their roles' placement; empty when all hold."""
    return _rules(config) + _role_problems(config)


def _role_problems(config: RunConfig) -> list[str]:
    """GPU shares need the role on cuda; ``placement.colocate`` names each started role at most once."""
    problems = []
    for role, device in (("reference", config.reference.device), ("critic", config.critic.device)):
        if getattr(config.placement, role).gpu > 0 and device != "cuda":
            problems.append(f"placement.{role}.gpu: a GPU share needs {role}.device: cuda")
    scorer_group = next((g for g in config.placement.colocate if "scorer" in g), [])
    stateful = [r for r in scorer_group if r in ("critic", "trainer")]
    if config.faults.kill_scorer_steps and stateful:
        problems.append(
            f"faults.kill_scorer_steps: scorer-0 shares a process with the {stateful[0]}, which Ray "
            "does not restart (it holds trained weights); inject the fault without that colocation"
        )
    return problems + colocation_problems(config.placement.colocate, run_roles(config))


def run_roles(config: RunConfig) -> tuple[str, ...]:
    """The roles this config starts (the critic for ppo, the reference when kl.coef > 0)."""
    return active_roles(config.trainer.algorithm, config.kl.coef)


def _rules(config: RunConfig) -> list[str]:
    problems = []
    t = config.trainer
    if config.kl.controller == "adaptive" and (config.kl.target_kl is None or config.kl.coef == 0):
        problems.append(
            "kl.controller: adaptive needs kl.target_kl (the KL to steer towards) and kl.coef > 0 (its start)"
        )
    if config.kl.coef > 0 and config.reference.runtime == "native":
        problems.append(f"reference.runtime: {NATIVE_REFUSED}")
    if t.algorithm == "ppo":
        spec = config.workload.spec
        longest = (max_prompt_tokens(spec) or 0) + max_response_tokens(spec)
        model = config.critic.model or config.policy.model
        try:
            context = model_context(model)
        except RlsimError as err:
            problems.append(f"critic.model: {err}")
        else:
            if context is not None and longest > context:
                problems.append(
                    f"critic.model: {model} reads at most {context} tokens, but prompt + response can "
                    f"reach {longest}; lower the workload's length maxima or use a critic with a "
                    "longer context"
                )
    return problems


def model_context(name_or_path: str) -> int | None:
    """``max_position_embeddings`` of a built-in policy or a folder's config.json, without building
    or loading the model (None when the config does not say)."""
    if name_or_path in BUILTIN_POLICIES:
        return int(TINY_LLAMA["max_position_embeddings"])
    cfg = Path(name_or_path).expanduser() / "config.json"
    if not cfg.is_file():
        raise RlsimError(
            f"{name_or_path!r} is neither a built-in policy ({', '.join(sorted(BUILTIN_POLICIES))}) "
            "nor a folder with config.json"
        )
    try:
        data = json.loads(cfg.read_text())
    except json.JSONDecodeError as err:
        raise RlsimError(f"{cfg} is not valid JSON ({err})") from None
    value = data.get("text_config", data).get("max_position_embeddings")
    return int(value) if value else None


def algorithm_settings(config: RunConfig) -> AlgorithmSettings:
    from rlsim.algorithms.experience import AlgorithmSettings

    t, kl = config.trainer, config.kl
    return AlgorithmSettings(
        algorithm=t.algorithm,
        gamma=t.gamma,
        lam=t.lam,
        kl_coef=kl.coef,
        kl_estimator=kl.estimator,
        kl_target=kl.target,
        kl_reward_form=kl.reward_form,
        normalize_std=t.normalize_std,
        std_ddof=t.std_ddof,
        std_eps=t.std_eps,
        group_of_one=t.group_of_one,
        kl_log_ratio_clamp=kl.log_ratio_clamp,
        kl_clamp=kl.clamp,
        kl_target_value=kl.target_kl if kl.controller == "adaptive" else None,
        kl_horizon=kl.horizon,
    )


def critic_settings(config: RunConfig, threads: int | None = None) -> CriticSettings:
    from rlsim.loop.roles.critic import CriticSettings

    t = config.trainer
    return CriticSettings(
        lr=t.critic_lr,
        value_clip=t.value_clip,
        epochs=t.epochs,
        micro_batch=config.critic.micro_batch,
        mini_batch_size=t.mini_batch_size,  # the actor's, as verl's critic.yaml and OpenRLHF default it
        max_grad_norm=t.max_grad_norm,
        device=config.critic.device,
        threads=threads,
        seed=config.seed,
    )


def reference_settings(config: RunConfig, threads: int | None = None) -> ReferenceSettings:
    r = config.reference
    return ReferenceSettings(runtime=r.runtime, micro_batch=r.micro_batch, device=r.device, threads=threads)
