"""The update phase's time with 1, 2 and 4 optimizer steps (mini-batches) per RL step.

    flock /tmp/rlsim-heavy.lock python benchmarks/bench_mini_batches.py            # 6 rounds
    flock /tmp/rlsim-heavy.lock python benchmarks/bench_mini_batches.py --rounds 10

The default run config's batch (8 prompts x 4 samples, response lengths drawn from its workload) on
the built-in policy, updated by one ``PolicyTrainer`` on the trainer's default thread count (2).
The update cost depends on the lengths, not on the tokens, so the rollouts carry random token ids of
the drawn lengths and no generator runs. Each round times one update per mini-batch setting, in a
rotated order so load drift hits all alike; ratios to the one-step update are paired within rounds.
Beside each, the planner's prediction of the same update from ``--profile``'s roles section
(``rlsim.planner.sim.update_steps``: the timed actor update and optimizer step, the same rollouts in
the same order). Writes benchmarks/results/bench_mini_batches.json; the last stdout line is one JSON
object.
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


def _rollouts(config: object) -> list:
    import numpy as np

    from rlsim.rollout.prompts import make_step_requests
    from rlsim.rollout.types import Rollout

    w = config.workload  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    out = []
    for r in make_step_requests(w.spec, 1, w.prompts_per_step, w.group_size):
        prompt = [int(x) for x in rng.integers(1000, 20000, size=24)]
        response = [int(x) for x in rng.integers(1000, 20000, size=r.response_tokens)]
        out.append(Rollout(r.uid, r.group, prompt, response))
    return out


def _predictions(profile_path: Path, batch: list, sizes: dict, micro_batch: int, threads: int) -> dict[int, float]:
    """The planner's seconds for each setting's update of ``batch``, from the profile's roles section."""
    import numpy as np

    from rlsim.planner.profile.schema import load_profile
    from rlsim.planner.sim.update_steps import UpdateShape, update_calls_s

    roles = load_profile(profile_path).roles
    if roles is None or roles.update_actor is None:
        raise SystemExit(f"{profile_path} has no timed actor update (roles.update_actor); re-run rlsim profile")
    tokens = np.array([len(r.prompt_ids) + len(r.response_ids) for r in batch])
    responses = np.array([len(r.response_ids) for r in batch])
    optimizer = roles.optimizer_s("actor", threads) or 0.0
    model = roles.update_actor
    return {
        steps: update_calls_s(model, optimizer, tokens, responses, UpdateShape(micro_batch, size), threads)
        for steps, size in sizes.items()
    }


def main() -> None:
    from rlsim.fingerprint import machine_fingerprint
    from rlsim.io import atomic_write_json
    from rlsim.loop.config import RunConfig
    from rlsim.loop.roles.trainer import PolicyTrainer, TrainerSettings
    from rlsim.metrics.stats import mean_ci, paired_log_ratio_ci
    from rlsim.models import resolve_policy

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--profile", default=str(ROOT / "configs" / "profiles" / "cpu_2core_measured.json"))
    args = p.parse_args()
    config = RunConfig()
    batch = _rollouts(config)
    t = config.trainer
    base = TrainerSettings(lr=t.lr, micro_batch=t.micro_batch, threads=args.threads, seed=0)
    trainer = PolicyTrainer(resolve_policy(config.policy.model), base)
    exp = trainer.experience(batch, {r.uid: float(r.uid % 3) for r in batch})
    sizes = {1: None, 2: len(batch) // 2, 4: len(batch) // 4}
    seconds: dict[int, list[float]] = {k: [] for k in sizes}
    step_s: dict[int, list[float]] = {k: [] for k in sizes}
    trainer.update(batch, exp)  # warm-up: optimizer state, allocator growth
    for i in range(args.rounds):
        order = list(sizes)[i % 3 :] + list(sizes)[: i % 3]
        for steps in order:
            trainer.settings = replace(base, mini_batch_size=sizes[steps])
            t0 = time.perf_counter()
            stats = trainer.update(batch, exp)
            seconds[steps].append(round(time.perf_counter() - t0, 4))
            assert stats.optimizer_steps == steps and stats.step_seconds is not None
            step_s[steps] += stats.step_seconds
    trainer.close()
    predicted = _predictions(Path(args.profile), batch, sizes, t.micro_batch, args.threads)
    summary = {}
    for steps in sizes:
        e = mean_ci(seconds[steps])
        summary[str(steps)] = {
            "median_s": round(statistics.median(seconds[steps]), 4),
            "mean_s": round(e.mean, 4),
            "ci95_s": [round(e.ci_low, 4), round(e.ci_high, 4)],
            "median_step_s": round(statistics.median(step_s[steps]), 4),
            "predicted_s": round(predicted[steps], 4),
            "predicted_ratio_to_1_step": round(predicted[steps] / predicted[1], 3),
        }
        if steps > 1:
            r = paired_log_ratio_ci(seconds[steps], seconds[1])
            summary[str(steps)]["ratio_to_1_step"] = [round(r.ratio, 3), round(r.ci_low, 3), round(r.ci_high, 3)]
    result = {
        "benchmark": "bench_mini_batches",
        "rollouts": len(batch),
        "response_tokens": sum(len(r.response_ids) for r in batch),
        "threads": args.threads,
        "rounds": args.rounds,
        "profile": args.profile,
        "seconds": {str(k): v for k, v in seconds.items()},
        "summary": summary,
        "load_average": os.getloadavg(),
        "machine": machine_fingerprint(),
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    atomic_write_json(Path(args.out) / "bench_mini_batches.json", result)
    print(json.dumps({"benchmark": "bench_mini_batches", "summary": summary}))


if __name__ == "__main__":
    main()
