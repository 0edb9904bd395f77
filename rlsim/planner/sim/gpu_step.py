"""One RL step on GPUs as NeMo-RL's GRPO loop runs it, phase by phase (seconds).

The phases and their order are those of ``nemo_rl/algorithms/grpo.py`` (v0.4): ``prepare_for_generation``
(refit: the trainer's weights into vLLM, waking it when colocated), ``generation`` (vLLM rollouts, the
environment's reward, and ``finish_generation``: vLLM's sleep when colocated), ``policy_and_reference_logprobs``
(forward-only passes of the old policy and, with a KL term, the reference), ``policy_training``
(``rollouts / train_global_batch_size`` optimizer steps over packed micro-batches, with activation
recompute and pipeline bubbles) and ``total_step_time``. Async GRPO (one step off-policy, split pools)
overlaps generation with the previous step's training. PPO adds the critic's values and update.

Costs come from the model's shape (``spec.model_shapes``), the GPU's datasheet (``profile.gpu_datasheets``)
and the achieved-efficiency factors (``profile.gpu_efficiency``); nothing here imports a framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlsim.errors import RlsimError
from rlsim.planner.profile.gpu_efficiency import Efficiency
from rlsim.planner.sim.gpu_generation import GB, EngineSetup, engine_times_events, prefill_s, schedule
from rlsim.planner.sim.gpu_judge import judge_s, judge_setup
from rlsim.planner.spec.gpu_run import GpuRunConfig

PHASES = ("generation", "logprobs_old", "logprobs_ref", "values", "training", "update_critic", "refit", "overhead")
NEMO_RL = {
    "generation": "timing/train/generation",
    "logprobs": "timing/train/policy_and_reference_logprobs",
    "training": "timing/train/policy_training",
    "refit": "timing/train/prepare_for_generation/total",
    "step": "timing/train/total_step_time",
}
VERL = {
    "generation": "timing_s/gen",
    "logprobs_old": "timing_s/old_log_prob",
    "logprobs_ref": "timing_s/ref",
    "values": "timing_s/values",
    "training": "timing_s/update_actor",
    "update_critic": "timing_s/update_critic",
    "refit": "timing_s/update_weights",
    "step": "timing_s/step",
}


@dataclass(frozen=True)
class StepPrediction:
    """Mean phase seconds over the simulated steps, the step time and the generation detail."""

    phases: dict[str, float]
    step_s: float
    detail: dict[str, float]

    def framework_names(self) -> dict[str, dict[str, float]]:
        p = self.phases
        logprobs = p["logprobs_old"] + p["logprobs_ref"]
        nemo_values = {
            "generation": p["generation"],
            "logprobs": logprobs,
            "training": p["training"] + p["update_critic"],
            "refit": p["refit"],
            "step": self.step_s,
        }
        verl_values = {**p, "step": self.step_s}
        return {
            "nemo_rl": {NEMO_RL[k]: v for k, v in nemo_values.items()},
            "verl": {VERL[k]: verl_values[k] for k in VERL},
        }


def response_lengths(cfg: GpuRunConfig, rng: np.random.Generator) -> np.ndarray:
    """One step's response lengths: lognormal, truncated at the context limit, mean ``response_mean``."""
    r = cfg.rollouts
    cap = r.max_sequence - r.prompt_tokens
    mu = _location_for_truncated_mean(r.response_mean, r.response_sigma, cap)
    draws = rng.lognormal(mu, r.response_sigma, r.rollouts)
    return np.clip(np.rint(draws), 1, cap).astype(np.int64)


def _location_for_truncated_mean(mean: float, sigma: float, cap: float) -> float:
    """``mu`` with E[min(X, cap)] = ``mean`` for X ~ lognormal(mu, sigma) (bisection on the closed form)."""

    def truncated_mean(mu: float) -> float:
        z = (math.log(cap) - mu) / sigma
        phi = 0.5 * (1 + math.erf((z - sigma) / math.sqrt(2)))
        tail = 0.5 * (1 - math.erf(z / math.sqrt(2)))
        return math.exp(mu + sigma**2 / 2) * phi + cap * tail

    lo, hi = -5.0, math.log(cap) + 5 * sigma
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if truncated_mean(mid) < mean else (lo, mid)
    return (lo + hi) / 2


def engine_setup(cfg: GpuRunConfig, eff: Efficiency) -> EngineSetup:
    g = cfg.generation
    return EngineSetup(
        model=cfg.shape,
        gpu=cfg.spec,
        tp=g.tp,
        precision=g.precision,
        gpu_memory_utilization=g.gpu_memory_utilization,
        max_num_seqs=g.max_num_seqs,
        max_model_len=cfg.rollouts.max_sequence,
        runtime_reserve_gb=eff.runtime_reserve_gb,
        nvlink_reach=nvlink_reach(cfg),
    )


def generation_s(cfg: GpuRunConfig, eff: Efficiency, lengths: np.ndarray) -> tuple[float, dict[str, float]]:
    """Seconds until the slowest engine finishes its share of ``lengths`` (decode, prefill, preemption)."""
    setup = engine_setup(cfg, eff)
    engines = cfg.generation_gpus // cfg.generation.tp
    per = math.ceil(len(lengths) / engines)
    padded = np.concatenate([lengths, np.zeros(per * engines - len(lengths), dtype=np.int64)]).reshape(engines, per)
    sustained, admitted = setup.slots(cfg.rollouts.prompt_tokens, lengths)
    starts = np.stack([schedule(row, sustained) for row in padded])
    costs = setup.decode_costs(eff.decode_bw, eff.decode_compute, eff.decode_fixed_s, eff.comm_eff)
    prompts = np.where(padded > 0, cfg.rollouts.prompt_tokens, 0)
    decode, iterations = engine_times_events(costs, padded, prompts, starts)
    unique = per / cfg.rollouts.group_size
    prefill = prefill_s(setup, cfg.rollouts.prompt_tokens, max(unique, 1.0), eff.prefill_compute)
    preempted = max(0, min(per, admitted) - sustained)
    recompute_tokens = cfg.rollouts.prompt_tokens + float(lengths.mean()) / 2
    recompute = preempted * setup.model.sequence_forward_flops(recompute_tokens) / setup.tp
    recompute /= setup.gpu.peak_flops(setup.precision) * eff.prefill_compute
    slowest = int(np.argmax(decode))
    detail = {
        "engines": engines,
        "slots": sustained,
        "kv_tokens": setup.kv_capacity_tokens(),
        "iterations_slowest": float(iterations[slowest]),
        "preempted_per_engine": preempted,
    }
    return float(decode[slowest]) + prefill + recompute, detail


def _bubble(pp: int, microbatches: float) -> float:
    """Megatron's 1F1B pipeline: (pp - 1) idle slots over ``microbatches`` per pipeline pass."""
    return 0.0 if pp == 1 else (pp - 1) / max(microbatches, 1.0)


def nvlink_reach(cfg: GpuRunConfig) -> int:
    """GPUs one NVLink fabric joins here: the node, or a whole NVL72 rack of 4-GPU trays."""
    domain = cfg.spec.nvlink_domain
    return domain if domain > cfg.gpus_per_node else min(domain, cfg.gpus_per_node)


def _link_gbs(cfg: GpuRunConfig, group_span: int) -> float:
    """Bandwidth of a collective spanning ``group_span`` GPUs: NVLink within its reach, else the network."""
    return cfg.spec.nvlink_gbs if group_span <= nvlink_reach(cfg) else cfg.spec.network_gbs


def trainer_phases(cfg: GpuRunConfig, eff: Efficiency, seq_tokens: np.ndarray) -> dict[str, float]:
    """Log-prob passes and optimizer steps over the step's packed sequences (``seq_tokens``: prompt + response)."""
    t, m = cfg.training, cfg.shape
    gpus = cfg.training_gpus
    dp = gpus // (t.tp * t.cp * t.pp)
    tokens = seq_tokens.astype(float)
    forward = float(np.sum(tokens * m.forward_flops((tokens + 1) / 2)))  # type: ignore[arg-type]  # elementwise
    # a MoE trainer reaches a share of the dense MFU (routing, all-to-all, small expert GEMMs: gpu_efficiency)
    peak = cfg.spec.peak_flops("bf16") * (eff.moe_share(m.name) if m.is_moe else 1.0)
    speed = eff.fp8_train_speedup if t.precision == "fp8" else 1.0
    mb_tokens = cfg.rollouts.max_sequence  # per data-parallel replica; context parallel splits each, not their count
    total_tokens = float(seq_tokens.sum())
    lp_micro = total_tokens / dp / (mb_tokens * t.logprob_batch_size)
    lp_mfu = eff.mfu(eff.logprob_mfu, t.backend, "logprob_mfu")
    one_pass = forward / gpus / (peak * lp_mfu) * (1 + _bubble(t.pp, lp_micro))
    opt_steps = max(1, math.ceil(cfg.rollouts.rollouts / t.train_global_batch_size))
    train_micro = total_tokens / opt_steps / dp / (mb_tokens * t.train_micro_batch_size)
    mult = 4.0 if t.activation_checkpointing else 3.0
    compute = forward * mult / gpus / (peak * eff.mfu(eff.train_mfu, t.backend, "train_mfu") * speed)
    compute *= 1 + _bubble(t.pp, train_micro)
    shard = _trainer_shard(cfg)
    grad = 0.0
    if dp > 1:
        link = _link_gbs(cfg, gpus) * GB * eff.comm_eff
        grad = opt_steps * eff.grad_exposed * 2 * (dp - 1) / dp * shard * 2.0 / link
    optimizer = opt_steps * shard / dp * 26.0 / (cfg.spec.hbm_gbs * GB * 0.5)  # fp32 master, m, v: read+write
    tp_fwd = _tp_comm_s(cfg, eff, total_tokens / dp / t.cp)
    one_pass += tp_fwd
    compute += tp_fwd * (mult - 1.0)  # the backward's collectives match its two forward-sized halves
    critic = cfg.rollouts.algorithm == "ppo"
    return {
        "logprobs_old": one_pass,
        "logprobs_ref": one_pass if cfg.rollouts.kl_reference else 0.0,
        "values": one_pass if critic else 0.0,
        "training": compute + grad + optimizer,
        "update_critic": compute + grad + optimizer if critic else 0.0,
    }


def _trainer_shard(cfg: GpuRunConfig) -> float:
    """Parameters one trainer GPU holds: dense weights over tp x pp, experts over ep x pp (NeMo-RL sets
    Megatron's ``expert_tensor_parallel_size: 1``, ``examples/configs/grpo_math_1B.yaml`` v0.5.0)."""
    t, m = cfg.training, cfg.shape
    experts = m.layers * m.experts * m.expert_params
    return (m.params - experts) / (t.tp * t.pp) + experts / (t.ep * t.pp)


def _tp_comm_s(cfg: GpuRunConfig, eff: Efficiency, tokens_per_replica: float) -> float:
    """Megatron's sequence-parallel collectives of one forward pass: per layer of a stage, an all-gather
    and a reduce-scatter around attention and around the MLP, each moving (tp-1)/tp of tokens x hidden."""
    t, m = cfg.training, cfg.shape
    if t.tp == 1:
        return 0.0
    link = _link_gbs(cfg, t.tp) * GB * eff.comm_eff
    per_layer = 4 * (t.tp - 1) / t.tp * tokens_per_replica * m.hidden * 2.0
    return m.layers / t.pp * per_layer / link


def refit_s(cfg: GpuRunConfig, eff: Efficiency) -> float:
    """Weights into vLLM: CUDA IPC plus vLLM's wake when colocated; an NCCL broadcast when split."""
    weights = cfg.shape.weight_bytes(1.0 if cfg.generation.precision == "fp8" else 2.0) / cfg.generation.tp
    if cfg.placement == "colocated":
        return eff.refit_fixed_s + weights / (cfg.spec.host_link_gbs * GB * eff.comm_eff)
    return eff.refit_fixed_s + weights / (cfg.spec.network_gbs * GB * eff.comm_eff)


def predict_step(cfg: GpuRunConfig, eff: Efficiency, steps: int | None = None) -> StepPrediction:
    """Mean phases over ``steps`` simulated steps (each with fresh response lengths) and the step time."""
    rng = np.random.default_rng(cfg.seed)
    n = steps or cfg.steps
    acc = dict.fromkeys(PHASES, 0.0)
    detail: dict[str, float] = {}
    step_total = 0.0
    for _ in range(n):
        lengths = response_lengths(cfg, rng)
        gen, detail = generation_s(cfg, eff, lengths)
        if cfg.judge is None:
            gen += cfg.rollouts.rollouts * eff.verifier_s_per_rollout / eff.verifier_workers
        else:  # inside the generation phase, as NeMo-RL's generation timer holds the environment's reward
            reward, judge_detail = judge_s(cfg, eff, lengths, nvlink_reach(cfg), gen)
            detail = {**detail, **judge_detail, "judge_s": reward}
            gen += reward
        weights_per_gpu = cfg.shape.weight_bytes(2.0) / cfg.generation.tp
        if cfg.placement == "colocated":  # vLLM's sleep: weights out to the host
            gen += weights_per_gpu / (cfg.spec.host_link_gbs * GB * eff.comm_eff)
        phases = {"generation": gen, **trainer_phases(cfg, eff, lengths + cfg.rollouts.prompt_tokens)}
        phases["refit"] = refit_s(cfg, eff)
        phases["overhead"] = eff.step_overhead_s
        trainer = sum(phases[k] for k in ("logprobs_old", "logprobs_ref", "values", "training", "update_critic"))
        if cfg.off_policy:
            step = max(gen, trainer + phases["refit"]) + phases["overhead"]
        else:
            step = gen + trainer + phases["refit"] + phases["overhead"]
        step_total += step
        for k in PHASES:
            acc[k] += phases[k]
    return StepPrediction({k: v / n for k, v in acc.items()}, step_total / n, detail)


def check_memory(cfg: GpuRunConfig, eff: Efficiency) -> dict[str, float]:
    """GB per GPU of the trainer and of a vLLM engine; a run that does not fit is refused with the arithmetic.

    Megatron with the distributed optimizer holds per parameter of its shard: 2 bytes of BF16 weights,
    4 of FP32 gradients and 12 of FP32 master weights and Adam moments split over the data-parallel ranks."""
    t, m = cfg.training, cfg.shape
    dp = cfg.training_gpus // (t.tp * t.cp * t.pp)
    shard = _trainer_shard(cfg)
    trainer_gb = shard * (2 + 4 + 12 / dp) / GB
    if trainer_gb + eff.runtime_reserve_gb > cfg.spec.hbm_gb:
        split = f"tp {t.tp} x pp {t.pp}" + (f", experts also over ep {t.ep}" if m.is_moe else "")
        raise RlsimError(
            f"{m.name} does not fit the trainer on {cfg.gpu}: {m.params / 1e9:.1f}e9 parameters over ({split}) = "
            f"{shard / 1e9:.2f}e9 per GPU x (2 + 4 + 12 / dp {dp}) bytes = {trainer_gb:.1f} GB per GPU plus "
            f"{eff.runtime_reserve_gb:g} GB reserve > {cfg.spec.hbm_gb:g} GB; raise training tp, pp or ep, or use "
            "more GPUs"
        )
    kv_tokens = engine_setup(cfg, eff).kv_capacity_tokens()  # refuses an engine that holds no sequence
    out = {"trainer_states": round(trainer_gb, 2), "engine_kv_tokens": kv_tokens}
    if cfg.judge is not None:  # the judge's engine too, with its own context (template + rollout + decode)
        try:
            out["judge_kv_tokens"] = judge_setup(cfg, cfg.judge, eff, nvlink_reach(cfg)).kv_capacity_tokens()
        except RlsimError as err:
            raise RlsimError(f"the judge: {err} (judge.tp, judge.gpu_memory_utilization)") from None
    return out
