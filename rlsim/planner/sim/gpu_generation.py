"""Generation as vLLM runs it: continuous batching of one engine, iteration by iteration, from the roofline.

vLLM's V1 scheduler (``vllm/v1/core/sched/scheduler.py``) runs one forward pass per iteration over every
running request, each emitting one token; a request joins as soon as a slot and KV blocks are free
(at most ``max_num_seqs`` at once, ``vllm/config/scheduler.py``) and leaves when it ends. The KV cache
gets the memory ``gpu_memory_utilization`` leaves after the weights (``vllm/v1/worker/gpu_worker.py``
``determine_available_memory``); when the running requests' contexts outgrow it, the newest are
preempted and later recomputed. Facts carried over, not code.

Here, per engine of ``tp`` GPUs:

- an iteration with ``n`` running requests holding ``c`` context tokens in all takes
  ``fixed + max(compute, memory) + all-reduce`` seconds: compute ``(2 P_mm n + 4 layers n_q d c) / tp``
  FLOPs at ``peak x decode_compute``; memory ``(weights / tp + KV bytes x c)`` at ``HBM x decode_bw``;
  two all-reduces per layer of ``n x hidden`` activations when ``tp > 1`` (NVLink inside the NVLink
  domain, the network beyond it). So batch 1 sits on the weight-read floor and a large batch on the
  compute roof. A mixture-of-experts model reads, besides its other weights, the experts its ``n``
  requests' tokens were routed to (``ModelShape.experts_touched``), each expert sharded over the TP
  ranks as vLLM's fused MoE layer shards it by default; FLOPs count the active parameters only.
- the slots are ``min(max_num_seqs, KV tokens / mean slot context)``: a slot's context averaged over
  the time it is held is ``prompt + E[L^2] / (2 E[L])`` (long responses hold slots longest); requests
  beyond the slots wait (list scheduling in arrival order). Requests vLLM admits beyond what the cache
  sustains are preempted once and pay a recompute of their prompt and half a mean response.
- GRPO's ``group_size`` samples of a prompt share its prefill (vLLM's prefix cache).

All engines of a step are computed together in numpy: one ``(engines, iterations)`` array.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from rlsim.errors import RlsimError
from rlsim.planner.profile.gpu_datasheets import GpuSpec
from rlsim.planner.spec.model_shapes import ModelShape

GB = 1e9


@dataclass(frozen=True)
class DecodeCosts:
    """The per-iteration coefficients of one engine (seconds)."""

    fixed_s: float
    compute_s_per_seq: float  # matrix FLOPs of one running request
    compute_s_per_ctx: float  # attention FLOPs per context token
    memory_s_weights: float  # every weight a token reads whatever its routing (all of a dense model)
    memory_s_per_ctx: float  # KV bytes per context token
    comm_s_fixed: float  # all-reduce latency per iteration
    comm_s_per_seq: float  # all-reduce bytes per running request
    memory_s_per_expert: float = 0.0  # one expert of every layer (MoE)
    model: ModelShape | None = None  # for the experts ``n`` running requests touch (MoE)

    def weights_s(self, running: np.ndarray) -> np.ndarray:
        """Seconds of weight reads of an iteration with ``running`` requests (MoE: the experts they touch)."""
        base = np.full(np.shape(running), self.memory_s_weights)
        if self.model is None or not self.model.is_moe:
            return base
        return base + self.memory_s_per_expert * np.asarray(self.model.experts_touched(running))

    def iteration_s(self, running: np.ndarray, context: np.ndarray) -> np.ndarray:
        """Seconds of each iteration with ``running`` requests over ``context`` tokens (0 where none run)."""
        compute = self.compute_s_per_seq * running + self.compute_s_per_ctx * context
        memory = self.weights_s(running) + self.memory_s_per_ctx * context
        step = self.fixed_s + np.maximum(compute, memory) + self.comm_s_fixed + self.comm_s_per_seq * running
        return np.where(running > 0, step, 0.0)


@dataclass(frozen=True)
class EngineSetup:
    """One vLLM engine: the model on ``tp`` GPUs of ``gpu`` at ``precision``, with its KV budget."""

    model: ModelShape
    gpu: GpuSpec
    tp: int
    precision: str  # "bf16" or "fp8" (weights and GEMMs; the KV cache stays BF16)
    gpu_memory_utilization: float
    max_num_seqs: int
    max_model_len: int
    runtime_reserve_gb: float  # activations of the profiling run, CUDA graphs, NCCL buffers
    nvlink_reach: int = 8  # GPUs one NVLink fabric joins (a node, or an NVL72 rack)

    @property
    def weight_bytes_per_param(self) -> float:
        return 1.0 if self.precision == "fp8" else 2.0

    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV heads are split over TP ranks, replicated when there are fewer heads than ranks."""
        heads_per_gpu = math.ceil(self.model.kv_heads / self.tp)
        return 2.0 * self.model.layers * heads_per_gpu * self.model.head_dim * 2.0

    def kv_capacity_tokens(self) -> int:
        """Tokens of context the engine's KV cache holds; refused (with the arithmetic) when not one sequence."""
        budget = self.gpu.hbm_gb * self.gpu_memory_utilization
        weights = self.model.weight_bytes(self.weight_bytes_per_param) / self.tp / GB
        free = budget - weights - self.runtime_reserve_gb
        tokens = int(max(free, 0.0) * GB / self.kv_bytes_per_token_per_gpu())
        if tokens < self.max_model_len:
            raise RlsimError(
                f"{self.model.name} does not fit a vLLM engine of {self.tp} x {self.gpu.name}: "
                f"{self.gpu.hbm_gb:g} GB x gpu_memory_utilization {self.gpu_memory_utilization:g} = {budget:.1f} GB "
                f"per GPU, minus weights {weights:.1f} GB and {self.runtime_reserve_gb:g} GB runtime reserve leaves "
                f"{free:.1f} GB = {tokens} KV tokens, fewer than max_model_len {self.max_model_len}; "
                "raise tensor parallelism or gpu_memory_utilization, or use a GPU with more memory"
            )
        return tokens

    def decode_costs(self, eff_bw: float, eff_compute: float, fixed_s: float, comm_eff: float) -> DecodeCosts:
        peak = self.gpu.peak_flops(self.precision) * eff_compute
        bw = self.gpu.hbm_gbs * GB * eff_bw
        m = self.model
        comm_fixed, comm_seq = 0.0, 0.0
        if self.tp > 1:
            # vLLM's one-shot custom all-reduce inside NVLink; NCCL rings beyond it (assumed latencies)
            inside = self.tp <= self.nvlink_reach
            link = (self.gpu.nvlink_gbs if inside else self.gpu.network_gbs) * GB * comm_eff
            latency = 8e-6 if inside else 30e-6
            comm_fixed = 2 * m.layers * latency
            comm_seq = 2 * m.layers * (m.hidden * 2.0 * 2.0 * (self.tp - 1) / self.tp) / link
        return DecodeCosts(
            fixed_s=fixed_s,
            compute_s_per_seq=2.0 * m.active_matmul_params / self.tp / peak,
            compute_s_per_ctx=4.0 * m.layers * m.heads * m.head_dim / self.tp / peak,
            memory_s_weights=m.decode_weight_bytes(self.weight_bytes_per_param) / self.tp / bw,
            memory_s_per_ctx=self.kv_bytes_per_token_per_gpu() / bw,
            comm_s_fixed=comm_fixed,
            comm_s_per_seq=comm_seq,
            memory_s_per_expert=m.expert_bytes(self.weight_bytes_per_param) / self.tp / bw,
            model=m,
        )

    def slots(self, prompt_mean: float, lengths: np.ndarray) -> tuple[int, int]:
        """(slots the cache sustains, slots vLLM admits at first) for responses drawn like ``lengths``."""
        mean_l = float(lengths.mean())
        slot_context = prompt_mean + float((lengths.astype(float) ** 2).mean()) / (2.0 * mean_l)
        sustained = max(1, int(self.kv_capacity_tokens() / slot_context))
        return min(self.max_num_seqs, sustained), self.max_num_seqs


def schedule(lengths: np.ndarray, slots: int) -> np.ndarray:
    """Start iteration of each request of one engine, admitted in order into ``slots`` (list scheduling)."""
    n = len(lengths)
    if n <= slots:
        return np.zeros(n, dtype=np.int64)
    starts = np.zeros(n, dtype=np.int64)
    free = [0] * slots
    for i, length in enumerate(lengths.tolist()):
        t = heapq.heappop(free)
        starts[i] = t
        heapq.heappush(free, t + int(length))
    return starts


def engine_times(
    costs: DecodeCosts, lengths: np.ndarray, prompts: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Decode seconds and iterations of each engine. ``lengths``, ``prompts``, ``starts``: (engines, requests)."""
    engines = lengths.shape[0]
    finish = starts + lengths
    k_max = int(finish.max()) + 1
    offset = (np.arange(engines) * k_max)[:, None]
    size = engines * k_max
    delta_n = np.bincount((offset + starts).ravel(), minlength=size) - np.bincount(
        (offset + finish).ravel(), minlength=size
    )
    # context at iteration k of a request started at s: prompt + (k - s) + 1 tokens
    w = (prompts - starts + 1).astype(float)
    delta_c = np.bincount((offset + starts).ravel(), w.ravel(), size) - np.bincount(
        (offset + finish).ravel(), w.ravel(), size
    )
    running = np.cumsum(delta_n.reshape(engines, k_max), axis=1)
    base = np.cumsum(delta_c.reshape(engines, k_max), axis=1)
    context = base + np.arange(k_max)[None, :] * running
    seconds = costs.iteration_s(running, context).sum(axis=1)
    return seconds, finish.max(axis=1)


def _linear_sum(a: np.ndarray, b: np.ndarray, k0: np.ndarray, k1: np.ndarray) -> np.ndarray:
    """Sum of ``a + b k`` over integers ``k0 <= k < k1`` (0 where the range is empty)."""
    count = np.maximum(k1 - k0, 0)
    return count * a + b * (k0 + k1 - 1) * count / 2.0


def engine_times_events(
    costs: DecodeCosts, lengths: np.ndarray, prompts: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The same sums as ``engine_times``, in closed form between events (a start or an end).

    Between two events ``n`` requests run and the context grows by ``n`` a step, so compute and memory
    time are both linear in the iteration ``k`` and the sum of their maximum splits at their crossing:
    O(requests) per engine instead of O(iterations)."""
    finish = starts + lengths
    times = np.concatenate([starts, finish], axis=1)
    w = (prompts - starts + 1).astype(float)
    d_n = np.concatenate([np.ones_like(starts), -np.ones_like(finish)], axis=1)
    d_w = np.concatenate([w, -w], axis=1)
    live = np.concatenate([lengths > 0, lengths > 0], axis=1)
    d_n, d_w = np.where(live, d_n, 0), np.where(live, d_w, 0.0)
    order = np.argsort(times, axis=1, kind="stable")
    t = np.take_along_axis(times, order, axis=1)
    n = np.cumsum(np.take_along_axis(d_n, order, axis=1), axis=1)[:, :-1].astype(float)
    base = np.cumsum(np.take_along_axis(d_w, order, axis=1), axis=1)[:, :-1]
    k0, k1 = t[:, :-1].astype(float), t[:, 1:].astype(float)
    c = costs
    # context(k) = base + n k: compute = cs n + cc (base + n k), memory = mw + mc (base + n k)
    a_cmp, b_cmp = c.compute_s_per_seq * n + c.compute_s_per_ctx * base, c.compute_s_per_ctx * n
    a_mem, b_mem = c.weights_s(n) + c.memory_s_per_ctx * base, c.memory_s_per_ctx * n
    da, db = a_cmp - a_mem, b_cmp - b_mem
    # compute >= memory where da + db k >= 0: from the crossing on when db > 0, up to it when db < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = -da / db
    rising = db > 0
    split_up = np.where(db == 0, np.where(da >= 0, k0, k1), np.clip(np.ceil(cross), k0, k1))
    split_down = np.clip(np.floor(cross) + 1, k0, k1)
    mem_first = rising | (db == 0)
    split = np.where(mem_first, split_up, split_down)
    lo = np.where(mem_first, _linear_sum(a_mem, b_mem, k0, split), _linear_sum(a_cmp, b_cmp, k0, split))
    hi = np.where(mem_first, _linear_sum(a_cmp, b_cmp, split, k1), _linear_sum(a_mem, b_mem, split, k1))
    fixed = (c.fixed_s + c.comm_s_fixed + c.comm_s_per_seq * n) * np.maximum(k1 - k0, 0)
    seconds = np.where(n > 0, lo + hi + fixed, 0.0).sum(axis=1)
    return seconds, finish.max(axis=1)


def prefill_s(setup: EngineSetup, prompt_tokens: float, unique_prompts: float, eff_compute: float) -> float:
    """Compute-bound prefill of ``unique_prompts`` prompts (the rest of each group hits the prefix cache)."""
    flops = unique_prompts * setup.model.sequence_forward_flops(prompt_tokens)
    return flops / setup.tp / (setup.gpu.peak_flops(setup.precision) * eff_compute)
