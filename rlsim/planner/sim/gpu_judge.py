"""The reward phase of a GPU step when a model scores: a reward model or a judge LLM on vLLM (``JudgeSpec``).

The same roofline as generation (``gpu_generation``), on the judge's own shape:

- every rollout is read once: a prefill of ``template + prompt + response`` tokens, compute-bound at the
  datasheet peak times ``prefill_compute``; a group's samples share the template and prompt (vLLM's prefix
  cache), so those are computed once per prompt. A reward model and a ``verdict`` judge stop there (the verdict's
  log-probability comes out of that pass);
- a ``score`` judge then decodes ``max_tokens`` per rollout by continuous batching over contexts that long,
  iteration by iteration as generation is (``engine_times_events``), on slots its KV cache sustains;
- rollouts are dealt evenly over ``gpus / tp`` engines; the phase ends with the slowest engine.

Where it runs decides what the step pays. On the generation GPUs (``gpus`` None) the judge is woken after
generation, while the policy's engine sleeps, and put to sleep before training: its work plus moving its weights
in and out over the host link. On GPUs of its own it scores rollouts as generation finishes them, so the step pays
only the work generation did not hide, and at least the latency of the last rollout's read: ``max(work -
generation, 0) + one rollout's latency`` (an assumption: rollouts finish spread over generation, and the judge
keeps up with them until generation ends).
"""

from __future__ import annotations

import math

import numpy as np

from rlsim.planner.profile.gpu_efficiency import Efficiency
from rlsim.planner.sim.gpu_generation import GB, EngineSetup, engine_times_events, schedule
from rlsim.planner.spec.gpu_run import GpuRunConfig, JudgeSpec


def judge_setup(cfg: GpuRunConfig, judge: JudgeSpec, eff: Efficiency, reach: int) -> EngineSetup:
    """One judge engine; its context holds the template, the longest rollout and what a score judge decodes."""
    decoded = judge.max_tokens if judge.mode == "score" else 1
    return EngineSetup(
        model=judge.shape,
        gpu=cfg.spec,
        tp=judge.tp,
        precision=judge.precision,
        gpu_memory_utilization=judge.gpu_memory_utilization,
        max_num_seqs=judge.max_num_seqs,
        max_model_len=judge.template_tokens + cfg.rollouts.max_sequence + decoded,
        runtime_reserve_gb=eff.runtime_reserve_gb,
        nvlink_reach=reach,
    )


def judge_s(
    cfg: GpuRunConfig, eff: Efficiency, lengths: np.ndarray, reach: int, generation_s: float
) -> tuple[float, dict[str, float]]:
    """Seconds the step waits for the judge after generation (of ``generation_s``) ends (see the module
    docstring), and the detail."""
    judge = cfg.judge
    assert judge is not None
    setup = judge_setup(cfg, judge, eff, reach)
    gpus = judge.gpus if judge.gpus is not None else cfg.generation_gpus
    engines = gpus // judge.tp
    r = cfg.rollouts
    contexts = (judge.template_tokens + r.prompt_tokens + lengths).astype(float)
    shared = float(judge.template_tokens + r.prompt_tokens)
    rate = cfg.spec.peak_flops(judge.precision) * eff.prefill_compute * judge.tp
    model = setup.model
    prefill_flops = float(np.sum(model.sequence_forward_flops(contexts)))  # type: ignore[arg-type]  # elementwise
    prefill_flops -= (r.rollouts - r.prompts_per_step) * model.sequence_forward_flops(shared)
    prefill = prefill_flops / engines / rate
    decode, one_decode = 0.0, 0.0
    if judge.mode == "score":
        per = math.ceil(len(lengths) / engines)
        ctx = np.concatenate([contexts, np.zeros(per * engines - len(contexts))]).reshape(engines, per)
        steps = np.where(ctx > 0, judge.max_tokens, 0).astype(np.int64)
        sustained, _ = setup.slots(float(contexts.mean()), np.full(len(lengths), judge.max_tokens))
        starts = np.stack([schedule(row, sustained) for row in steps])
        costs = setup.decode_costs(eff.decode_bw, eff.decode_compute, eff.decode_fixed_s, eff.comm_eff)
        decode = float(engine_times_events(costs, steps, ctx.astype(np.int64), starts)[0].max())
        alone = np.array([[judge.max_tokens]], dtype=np.int64)
        longest = np.array([[int(contexts.max())]])
        one_decode = float(engine_times_events(costs, alone, longest, np.zeros_like(alone))[0][0])
    work = prefill + decode
    latency = model.sequence_forward_flops(float(contexts.max())) / rate + one_decode
    detail = {"judge_engines": float(engines), "judge_prefill_s": prefill, "judge_decode_s": decode,
              "judge_kv_tokens": float(setup.kv_capacity_tokens())}  # fmt: skip
    if judge.gpus is None:  # taking turns with the policy's engine: wake (load) and sleep (offload) its weights
        link = cfg.spec.host_link_gbs * GB * eff.comm_eff
        swap = 2.0 * model.weight_bytes(setup.weight_bytes_per_param) / judge.tp / link
        detail["judge_swap_s"] = swap
        return work + swap, detail
    return max(work - generation_s, 0.0) + latency, detail
