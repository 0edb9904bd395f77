"""What asking vLLM for each sampled token's log-prob (the async schedule's behaviour log-probs) costs.

    python benchmarks/bench_behaviour_logprobs.py               # 8 pairs of configs/async.yaml batches

One in-process vLLM engine on the tiny policy; each pair generates the same batch (step k's prompts and
lengths from configs/async.yaml) once plain and once with ``logprobs=0``, in alternating order, so load
drift hits both alike; the ratio is taken within each pair. Writes
benchmarks/results/bench_behaviour_logprobs.json; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from rlsim.fingerprint import machine_fingerprint
    from rlsim.io import atomic_write_json
    from rlsim.loop.config import load_run_config
    from rlsim.models import resolve_policy
    from rlsim.rollout.generator import GeneratorSettings
    from rlsim.rollout.prompts import make_step_requests
    from rlsim.rollout.vllm_generator import VllmGenerator

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args()
    cfg = load_run_config(ROOT / "configs" / "async.yaml")
    w = cfg.workload
    base = GeneratorSettings(cores=tuple(sorted(os.sched_getaffinity(0))), seed=0)
    t0 = time.perf_counter()
    gen = VllmGenerator(resolve_policy(cfg.policy.model), base)
    start_s = time.perf_counter() - t0
    seconds: dict[str, list[float]] = {"plain": [], "logprobs": []}
    try:
        gen.generate(make_step_requests(w.spec, 0, 2, 2))  # warm-up
        for i in range(args.pairs):
            reqs = make_step_requests(w.spec, i + 1, w.prompts_per_step, w.group_size)
            for mode in ("plain", "logprobs") if i % 2 == 0 else ("logprobs", "plain"):
                gen.settings = replace(base, behaviour_logprobs=mode == "logprobs")
                t = time.perf_counter()
                out = gen.generate(reqs)
                seconds[mode].append(round(time.perf_counter() - t, 4))
                assert (out[0].behaviour_logprobs is not None) == (mode == "logprobs")
    finally:
        gen.close()
    ratios = [b / a for a, b in zip(seconds["plain"], seconds["logprobs"], strict=True)]
    result = {
        "benchmark": "bench_behaviour_logprobs",
        "rollouts_per_call": w.prompts_per_step * w.group_size,
        "engine_start_s": round(start_s, 2),
        "seconds": seconds,
        "ratio_logprobs_over_plain": [round(r, 3) for r in ratios],
        "median_ratio": round(statistics.median(ratios), 3),
        "load_average": os.getloadavg(),
        "machine": machine_fingerprint(),
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    atomic_write_json(Path(args.out) / "bench_behaviour_logprobs.json", result)
    print(json.dumps({k: result[k] for k in ("benchmark", "median_ratio", "ratio_logprobs_over_plain")}))


if __name__ == "__main__":
    main()
