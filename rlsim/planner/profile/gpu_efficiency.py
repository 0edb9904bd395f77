"""Achieved fractions of the datasheet peaks, and fixed costs: the only numbers of the GPU step model
that are not a datasheet's, a model config's or a framework config's.

Each factor's entry in ``provenance`` says where it comes from: ``fitted: <row ids>`` (the published
runs it was fitted on, ``rlsim.planner.profile.fitting.gpu``), ``assumed: <derivation>`` or
``log: <file>`` (``rlsim profile --from-log`` style fills from a user's own run). A factor without an
entry is refused, so no number enters a plan unexplained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.errors import ConfigError
from rlsim.io import atomic_write_json


class Efficiency(BaseModel):
    """Factors in (0, 1] are shares of a peak; ``*_s`` are seconds; per-backend ones map backend -> value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decode_bw: float = Field(gt=0, le=1, description="share of HBM bandwidth a decode iteration achieves")
    decode_fixed_s: float = Field(ge=0, description="per-iteration cost outside the roofline (scheduler, sampling)")
    decode_compute: float = Field(gt=0, le=1, description="share of dense peak a large decode batch achieves")
    prefill_compute: float = Field(gt=0, le=1)
    logprob_mfu: dict[str, float] = Field(description="forward-only log-prob passes, per training backend")
    train_mfu: dict[str, float] = Field(description="forward+backward, per training backend")
    refit_fixed_s: float = Field(ge=0, description="weight gather, re-shard and load_weights per refit")
    step_overhead_s: float = Field(ge=0, description="framework time per step outside every phase")
    comm_eff: float = Field(gt=0, le=1, description="achieved share of NVLink / network / host-link bandwidth")
    grad_exposed: float = Field(ge=0, le=1, description="share of the gradient all-reduce not hidden by backward")
    fp8_train_speedup: float = Field(ge=1, description="FP8 over BF16 training compute, end to end")
    verifier_s_per_rollout: float = Field(ge=0, description="rule-based reward (math-verify) per rollout")
    verifier_workers: int = Field(ge=1, description="reward workers running in parallel")
    runtime_reserve_gb: float = Field(ge=0, description="vLLM memory outside weights and KV cache per GPU")
    moe_mfu_share: dict[str, Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]] = Field(
        default_factory=dict,
        description="per MoE model: its trainer's achieved model FLOP/s as a share of a dense model's on one GPU",
    )
    provenance: dict[str, str] = Field(default_factory=dict)
    fitted_on: list[str] = Field(default_factory=list, description="ids of the published rows fitted on")

    @model_validator(mode="after")
    def _explained(self) -> Efficiency:
        missing = [
            k for k in type(self).model_fields if k not in ("provenance", "fitted_on") and k not in self.provenance
        ]
        if missing:
            raise ValueError(f"factors without a provenance entry: {', '.join(missing)}")
        return self

    def moe_share(self, model: str) -> float:
        """The MoE model's share of dense MFU; a model without one is refused, naming those that have one."""
        if model not in self.moe_mfu_share:
            known = ", ".join(sorted(self.moe_mfu_share)) or "none"
            raise ConfigError(
                [
                    f"efficiency has no moe_mfu_share for {model!r} (it has: {known}): a mixture of experts trains at "
                    "a fraction of a dense model's MFU; add the model's entry (its model TFLOP/s over a dense "
                    "model's in one pre-training table, or fill it from your own run's log)"
                ]
            )
        return self.moe_mfu_share[model]

    def mfu(self, table: dict[str, float], backend: str, what: str) -> float:
        if backend not in table:
            raise ConfigError([f"efficiency has no {what} for backend {backend!r} (it has {', '.join(sorted(table))})"])
        return table[backend]


def load_efficiency(path: Path) -> Efficiency:
    try:
        data = json.loads(path.read_text())
        return Efficiency.model_validate(data)
    except (OSError, ValueError) as err:
        raise ConfigError(
            [
                f"{path}: not a readable efficiency JSON ({err}); re-fit it with "
                "python -m rlsim.planner.profile.fitting.gpu"
            ]
        ) from None


def save_efficiency(eff: Efficiency, path: Path) -> None:
    atomic_write_json(path, eff.model_dump())


# Megatron-Bridge's pre-training table (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md,
# "26.04.01 NeMo Container", DGX-H100, FP8, token-dropless MoE): model TFLOP/s per GPU of each MoE model over
# the dense Llama3-70B's 731 in the same table. Relative factors: they scale the dense MFU fitted on the
# calibration rows. The same table's GB200 rows give 0.32 and 0.44 (over Llama3-70B's 1,892): not applied.
MOE_MFU_SHARE_SOURCE = (
    "publication: Megatron-Bridge docs/performance-summary-archive.md, 26.04.01 container, DGX-H100 FP8: "
    "Qwen3_30B_a3B 206 and Qwen3_235B_a22B 253 model TFLOP/s per GPU over LLAMA3_70B's 731"
)

# Numbers the calibration never fits: each derivation is the provenance entry it is saved with.
ASSUMED: dict[str, tuple[object, str]] = {
    "moe_mfu_share": (
        {"qwen3-30b-a3b": round(206 / 731, 3), "qwen3-235b-a22b": round(253 / 731, 3)},
        MOE_MFU_SHARE_SOURCE,
    ),
    "decode_compute": (0.5, "assumed: large-batch decode GEMMs at half of dense peak (no publication gives it)"),
    "prefill_compute": (
        0.5,
        "assumed as the sourced H100 profile's prefill MFU (configs/profiles/h100_published.json)",
    ),
    "comm_eff": (0.8, "assumed: 80% of link bandwidth achieved, as the sourced H100 profile"),
    "grad_exposed": (0.3, "assumed: Megatron overlaps 70% of the gradient reduce with backward (sourced profile)"),
    "fp8_train_speedup": (1.35, "assumed: FP8 over BF16 training, as the sourced H100 profile's trainer derivation"),
    "verifier_s_per_rollout": (0.02, "assumed: math-verify 20 ms per answer on one core (sourced H100 profile)"),
    "verifier_workers": (8, "NeMo-RL grpo_math_1B.yaml env.math.num_workers = 8"),
    "runtime_reserve_gb": (3.0, "assumed: vLLM's profiling-run activations (16,384 batched tokens), CUDA graphs, NCCL"),
}
