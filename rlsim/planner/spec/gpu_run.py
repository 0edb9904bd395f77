"""The ``kind: gpu-step`` plan YAML: an RL run on GPUs, described as the frameworks configure it.

Field names follow NeMo-RL's GRPO config (``examples/configs/grpo_math_1B.yaml``: ``num_prompts_per_step``,
``num_generations_per_prompt``, ``train_global_batch_size``, ``train_micro_batch_size``,
``logprob_batch_size``, ``max_total_sequence_length``, ``vllm_cfg.gpu_memory_utilization``, ``colocated``)
where they exist, so a user can copy them from their run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.config_loader import apply_overrides, load_yaml, validate
from rlsim.errors import ConfigError
from rlsim.planner.profile.gpu_datasheets import GPUS, GpuSpec
from rlsim.planner.spec.model_shapes import MODELS, ModelShape

Precision = Literal["bf16", "fp8"]


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RolloutSpec(_Cfg):
    """Rollouts of one step: ``prompts_per_step`` x ``group_size``; lengths in tokens.

    Response lengths are lognormal with ``response_sigma``, truncated at ``max_sequence - prompt_tokens``,
    with the location chosen so that the truncated mean is ``response_mean`` (publications give the mean)."""

    prompts_per_step: int = Field(ge=1)
    group_size: int = Field(default=1, ge=1)
    prompt_tokens: int = Field(ge=1)
    response_mean: float = Field(gt=1)
    response_sigma: float = Field(default=0.8, gt=0, le=3)
    max_sequence: int = Field(ge=2)
    algorithm: Literal["grpo", "ppo"] = "grpo"
    kl_reference: bool = Field(default=True, description="reference log-probs for the KL term (NeMo-RL: kl > 0)")
    reward: Literal["rule-based", "reward-model", "genrm"] = Field(
        default="rule-based",
        description=(
            "rule-based: the efficiency's verifier on CPU workers; reward-model (one forward pass) or genrm (a judge "
            "LLM): the `judge` section's model on vLLM"
        ),
    )

    @property
    def rollouts(self) -> int:
        return self.prompts_per_step * self.group_size

    @model_validator(mode="after")
    def _fits(self) -> RolloutSpec:
        if self.prompt_tokens + self.response_mean >= self.max_sequence:
            raise ValueError(
                f"prompt_tokens {self.prompt_tokens} + response_mean {self.response_mean:g} must stay below "
                f"max_sequence {self.max_sequence}"
            )
        return self


class GenerationSpec(_Cfg):
    """vLLM engines: ``tp`` GPUs each; ``gpus`` of the cluster when the pools are split (None: all, colocated)."""

    tp: int = Field(default=1, ge=1)
    gpus: int | None = Field(default=None, ge=1)
    max_num_seqs: int = Field(default=1024, ge=1, description="vLLM's default on >=70 GiB GPUs (arg_utils.py)")
    gpu_memory_utilization: float = Field(default=0.6, gt=0, le=0.98)
    precision: Precision = "bf16"


class JudgeSpec(_Cfg):
    """The model that scores rollouts on GPUs (``rollouts.reward: reward-model`` or ``genrm``), served by vLLM.

    It reads ``template_tokens`` of instructions around each rollout's prompt and response (the group's samples
    share the instructions and prompt through vLLM's prefix cache). A reward model and a ``verdict`` judge run one
    forward pass per rollout (GenRM, arXiv 2408.15240: P("Yes") after the question); a ``score`` judge then decodes
    up to ``max_tokens`` (ROLL's ``LLMJudgeRewardWorker`` parses a score from the decoded text).
    ``gpus``: None puts its engines on the generation GPUs, woken after generation while the policy's engine
    sleeps (verl's colocated reward mode, ``docs/advance/reward_loop.rst``); N gives it N GPUs of its own beside
    ``gpus`` (standalone), scoring rollouts as they finish."""

    model: str | ModelShape
    tp: int = Field(default=1, ge=1)
    gpus: int | None = Field(default=None, ge=1)
    precision: Precision = "bf16"
    gpu_memory_utilization: float = Field(default=0.6, gt=0, le=0.98)
    max_num_seqs: int = Field(default=1024, ge=1)
    template_tokens: int = Field(default=64, ge=0, le=1_000_000)
    mode: Literal["verdict", "score"] = "verdict"
    max_tokens: int = Field(default=32, ge=1, le=1_000_000, description="score mode: tokens the judge decodes")

    @property
    def shape(self) -> ModelShape:
        return MODELS[self.model] if isinstance(self.model, str) else self.model


class TrainingSpec(_Cfg):
    """The policy trainer: Megatron or DTensor (FSDP2), its parallelism and batch sizes.

    ``cp`` (context parallel) splits each sequence over ranks; ``ep`` (expert parallel, MoE only) splits the
    experts over the ranks of a pipeline stage, as Megatron's ``expert_model_parallel_size`` does with NeMo-RL's
    ``expert_tensor_parallel_size: 1`` (the performance summaries' Training [TP, CP, EP, PP])."""

    backend: Literal["megatron", "dtensor"] = "megatron"
    tp: int = Field(default=1, ge=1)
    cp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    train_global_batch_size: int = Field(default=512, ge=1)
    train_micro_batch_size: int = Field(default=1, ge=1)
    logprob_batch_size: int = Field(default=4, ge=1)
    activation_checkpointing: bool = False
    precision: Precision = "bf16"


class GpuRunConfig(_Cfg):
    """A whole run. ``placement``: ``colocated`` (vLLM sleeps while the trainer runs) or ``split`` pools;
    ``schedule``: ``sync`` (on-policy) or ``async`` (one step off-policy, needs split pools)."""

    kind: Literal["gpu-step"]
    name: str = "gpu-run"
    model: str | ModelShape
    gpu: str
    gpus: int = Field(ge=1)
    gpus_per_node: int = Field(default=8, ge=1)
    rollouts: RolloutSpec
    generation: GenerationSpec = GenerationSpec()
    training: TrainingSpec = TrainingSpec()
    judge: JudgeSpec | None = None
    placement: Literal["colocated", "split"] = "colocated"
    schedule: Literal["sync", "async"] = "sync"
    efficiency: str = Field(description="efficiency-factor JSON, relative to the YAML's folder")
    steps: int = Field(default=5, ge=1)
    seed: int = 0

    @property
    def off_policy(self) -> bool:
        """True for NeMo-RL's async GRPO (generation of step n+1 overlaps training of step n). This is NeMo-RL's
        ``sync``/``async`` knob, not one of the loop's schedules in ``rlsim.schedule_kinds``."""
        return self.schedule == "async"

    @model_validator(mode="after")
    def _check(self) -> GpuRunConfig:
        errors = []
        if isinstance(self.model, str) and self.model not in MODELS:
            errors.append(f"model {self.model!r} is unknown: known models are {', '.join(sorted(MODELS))}")
        if self.gpu not in GPUS:
            errors.append(f"gpu {self.gpu!r} is unknown: known GPUs are {', '.join(sorted(GPUS))}")
        if self.off_policy and self.placement != "split":
            errors.append("schedule async needs placement split (NeMo-RL's async GRPO runs on separate pools)")
        gen, train = self.generation_gpus, self.training_gpus
        if self.placement == "split" and (self.generation.gpus is None or gen >= self.gpus):
            errors.append(f"placement split needs generation.gpus below gpus ({self.gpus}), e.g. {self.gpus // 2}")
        if gen % self.generation.tp:
            errors.append(f"generation GPUs {gen} are not a multiple of generation.tp {self.generation.tp}")
        errors += self._judge_problems()
        t = self.training
        mp = t.tp * t.cp * t.pp
        if train > 0 and train % mp:
            errors.append(f"training GPUs {train} are not a multiple of training tp x cp x pp = {mp}")
        elif t.ep > 1 and not self._model_is_moe():
            errors.append("training.ep > 1 needs a mixture-of-experts model (experts to split); set ep to 1")
        elif train > 0 and (train // t.pp) % t.ep:
            errors.append(f"training GPUs per pipeline stage {train // t.pp} are not a multiple of ep {t.ep}")
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def _judge_problems(self) -> list[str]:
        r, j = self.rollouts.reward, self.judge
        if r == "rule-based":
            return ["judge is set but rollouts.reward is rule-based; set reward to genrm or reward-model"] if j else []
        if j is None:
            return [f"rollouts.reward {r} needs a judge section: the model that scores (model, tp, gpus, ...)"]
        errors = []
        if isinstance(j.model, str) and j.model not in MODELS:
            errors.append(f"judge.model {j.model!r} is unknown: known models are {', '.join(sorted(MODELS))}")
        if r == "reward-model" and j.mode == "score":
            errors.append("judge.mode score decodes, which a reward model does not; use reward genrm or mode verdict")
        if j.gpus is None and self.placement == "split":
            errors.append(
                "a judge without judge.gpus takes turns with the policy's engine, which only colocated placement "
                "puts to sleep; give the judge GPUs of its own (judge.gpus) under placement split"
            )
        judge_gpus = j.gpus if j.gpus is not None else self.generation_gpus
        if judge_gpus % j.tp:
            errors.append(f"judge GPUs {judge_gpus} are not a multiple of judge.tp {j.tp}")
        return errors

    @property
    def shape(self) -> ModelShape:
        return MODELS[self.model] if isinstance(self.model, str) else self.model

    def _model_is_moe(self) -> bool:
        """Whether the model is a mixture of experts (False for an unknown name, reported on its own)."""
        if isinstance(self.model, str):
            return self.model in MODELS and MODELS[self.model].is_moe
        return self.model.is_moe

    @property
    def spec(self) -> GpuSpec:
        return GPUS[self.gpu]

    @property
    def generation_gpus(self) -> int:
        return self.gpus if self.placement == "colocated" else (self.generation.gpus or 0)

    @property
    def training_gpus(self) -> int:
        return self.gpus if self.placement == "colocated" else self.gpus - (self.generation.gpus or 0)


def is_gpu_run(path: Path) -> bool:
    """Whether a plan YAML is a ``kind: gpu-step`` run (the other kind is the profile-based cluster plan)."""
    data = load_yaml(path)
    return isinstance(data, dict) and data.get("kind") == "gpu-step"


def load_gpu_run(path: Path, overrides: list[str]) -> tuple[GpuRunConfig, Path]:
    """The validated run and the efficiency JSON's path (relative to the YAML's folder)."""
    data = apply_overrides(load_yaml(path), overrides)
    config = validate(GpuRunConfig, data, str(path))
    eff = (path.parent / config.efficiency).resolve()
    if not eff.is_file():
        raise ConfigError([f"efficiency: {eff} does not exist (fit one: python -m rlsim.planner.profile.fitting.gpu)"])
    return config, eff
