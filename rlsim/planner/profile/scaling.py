"""Profile sections for GPU clusters: multi-GPU engines, data-parallel trainers, function rewards.

``ParallelScaling`` (inside ``GenerationModel``): tensor/pipeline-parallel engines. ``DataParallel``
(inside ``TrainerModel``): the gradient all-reduce across GPUs and nodes, and weight sync between
split pools. ``RewardFunctionModel``: a rule-based reward on CPU workers. Times in seconds.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParallelScaling(_Strict):
    """How one engine spread over several GPUs decodes (tensor and pipeline parallel, as vLLM runs them).

    Tensor parallel over ``t`` GPUs divides an iteration's compute by ``tp_speedup[t]`` (measured or
    sourced: all-reduce traffic keeps it below ``t``) and adds ``tp_comm_s[t]`` per iteration.
    Pipeline parallel over ``p`` stages keeps ``p`` micro-batches in flight: each running sequence
    still advances one token per round trip, whose compute is ``base_s + per_seq_s x n / min(p, n)``
    (the fixed part is paid by every micro-batch, the per-sequence part is shared by ``p`` GPUs; with
    fewer sequences than stages the pipeline has bubbles) plus ``pp_hop_s`` per stage boundary.
    A degree missing from ``tp_speedup`` is refused by the planner rather than guessed.
    """

    tp_speedup: dict[int, float] = Field(default_factory=lambda: {1: 1.0})
    tp_comm_s: dict[int, float] = Field(default_factory=dict, description="seconds per iteration, by TP degree")
    pp_hop_s: float = Field(default=0.0, ge=0, description="seconds per stage boundary per iteration")
    max_pp: int = Field(default=1, ge=1)

    def iteration_s(self, base_s: float, per_seq_s: float, running: np.ndarray, tp: int, pp: int) -> np.ndarray:
        """Seconds per decode round trip with ``running`` sequences (array) on a ``tp`` x ``pp`` engine."""
        micro = np.minimum(float(pp), np.maximum(running, 1.0))
        compute = (base_s + per_seq_s * running / micro) / self.tp_speedup[tp]
        return compute + self.tp_comm_s.get(tp, 0.0) + self.pp_hop_s * (pp - 1)


class DataParallel(_Strict):
    """Gradient all-reduce of a data-parallel trainer and weight sync between split GPU pools.

    A ring all-reduce over ``N`` GPUs moves ``2 (N - 1) / N x grad_bytes`` per GPU; its slowest link
    is the network between nodes once the trainer spans several (``inter_node_gbps`` per GPU), else
    NVLink (``intra_node_gbps``). ``overlap`` is the share hidden behind the backward pass;
    ``optimizer_steps`` all-reduces happen per RL step. Bandwidths in GB/s (bytes, not bits).
    """

    grad_bytes: float = Field(ge=0, description="bytes of gradients all-reduced per optimizer step")
    intra_node_gbps: float = Field(gt=0)
    inter_node_gbps: float = Field(gt=0)
    overlap: float = Field(default=0.0, ge=0, le=1)
    optimizer_steps: int = Field(default=1, ge=1)
    split_sync_s: float | None = Field(
        default=None,
        ge=0,
        description=("seconds to send the weights from the trainer's GPUs to engines on other GPUs (split pools)"),
    )

    def allreduce_s(self, units: float, nodes: int) -> float:
        if units <= 1:
            return 0.0
        bandwidth = (self.inter_node_gbps if nodes > 1 else self.intra_node_gbps) * 1e9
        per_step = 2.0 * (units - 1.0) / units * self.grad_bytes / bandwidth
        return per_step * (1.0 - self.overlap) * self.optimizer_steps


RULE_BASED = ("function", "sandbox")  # the rlsim runtimes a RewardFunctionModel times: a pool of worker processes


class RewardFunctionModel(_Strict):
    """A reward computed by a function (a verifier, a unit-test runner) on CPU worker processes.

    Each rollout takes one worker for a service time drawn from ``distribution`` with mean
    ``mean_s`` and coefficient of variation ``cv`` (std / mean; exponential forces 1, fixed 0); a
    worker is one core, and the workers per node are the concurrency cap. ``rlsim profile`` times one
    (``rewards:`` of its config, ``rlsim.planner.measure.rewards``) and keeps the samples.
    """

    device: Literal["cpu"] = "cpu"
    mean_s: float = Field(gt=0)
    cv: float = Field(default=1.0, ge=0)
    distribution: Literal["lognormal", "exponential", "fixed"] = "lognormal"
    runtime: str | None = Field(default=None, description="the rlsim runtime timed (function, sandbox); None: assumed")
    samples_s: list[float] = Field(default_factory=list, description="one worker's seconds per rollout, as timed")

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` service times in seconds."""
        if self.distribution == "fixed" or self.cv == 0:
            return np.full(size, self.mean_s)
        if self.distribution == "exponential":
            return rng.exponential(self.mean_s, size)
        sigma2 = np.log1p(self.cv**2)
        return rng.lognormal(np.log(self.mean_s) - sigma2 / 2.0, np.sqrt(sigma2), size)
