"""How fast the GPU step model simulates a large cluster: 10,000 GPUs x 100 steps (issue 26: under 30 s).

    flock /tmp/rlsim-heavy.lock .venv/bin/python benchmarks/bench_gpu_planner.py \
        --json benchmarks/results/gpu_planner_bench.json

The run: Llama-3.1-70B GRPO on 10,000 H100 colocated, vLLM engines of TP 8 (1,250 engines), 80,000 rollouts
a step (64 per engine), Megatron TP 8 x PP 2. Each repeat is a fresh simulation of all 100 steps (new
response lengths each step); the median of the repeats is reported with the spread. The last stdout
line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.planner.profile.gpu_efficiency import load_efficiency  # noqa: E402
from rlsim.planner.sim.gpu_step import predict_step  # noqa: E402
from rlsim.planner.spec.gpu_run import GpuRunConfig  # noqa: E402

RUN = {
    "kind": "gpu-step",
    "name": "bench-10k",
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm",
    "gpus": 10_000,
    "rollouts": {
        "prompts_per_step": 2_500,
        "group_size": 32,
        "prompt_tokens": 200,
        "response_mean": 900,
        "max_sequence": 4096,
    },
    "generation": {"tp": 8, "gpu_memory_utilization": 0.6},
    "training": {"tp": 8, "pp": 2, "activation_checkpointing": True, "train_global_batch_size": 8_192},
    "efficiency": "profiles/gpu_efficiency_nemo_rl.json",
    "steps": 100,
    "seed": 0,
}


def _cpu() -> dict[str, object]:
    """CPU model and the vector flags that matter to numpy's kernels (from /proc/cpuinfo)."""
    model, flags = platform.processor(), []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni")
                flags = [f for f in line.split(":", 1)[1].split() if f in wanted]
                break
    except OSError:
        pass
    return {"cpu": model, "cpu_flags": flags}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    cfg = GpuRunConfig.model_validate(RUN)
    eff = load_efficiency(ROOT / "configs" / "profiles" / "gpu_efficiency_nemo_rl.json")
    predict_step(cfg, eff, steps=1)  # warm-up: imports, first allocations
    times, step_s = [], 0.0
    for i in range(args.repeats):
        t0 = time.perf_counter()
        step_s = predict_step(cfg.model_copy(update={"seed": i}), eff).step_s
        times.append(time.perf_counter() - t0)
        print(f"repeat {i + 1}/{args.repeats}: {times[-1]:.2f} s", file=sys.stderr)
    result = {
        "benchmark": "gpu_planner_10k_gpus_100_steps",
        "gpus": cfg.gpus,
        "engines": cfg.gpus // cfg.generation.tp,
        "steps": cfg.steps,
        "rollouts_per_step": cfg.rollouts.rollouts,
        "wall_s_median": round(statistics.median(times), 3),
        "wall_s_min": round(min(times), 3),
        "wall_s_max": round(max(times), 3),
        "repeats": args.repeats,
        "target_s": 30.0,
        "predicted_step_s": round(step_s, 2),
        "machine": {**_cpu(), "cores": os.cpu_count(), "python": platform.python_version()},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
