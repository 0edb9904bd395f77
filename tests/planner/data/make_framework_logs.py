"""Writes the example framework logs beside it: ``python tests/planner/data/make_framework_logs.py``.

The logs are SYNTHETIC: the key names and record shapes are verl's and OpenRLHF's (see
``rlsim/planner/profile/logs/frameworks.py`` for the source files they come from), the numbers come
from a seeded cost model of an 8-GPU node with 2-10 % noise, so a test can check that a profile fitted
to them reproduces the logged step times and recovers the model's coefficients. They are not
measurements of any real cluster.
"""

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(16)
    lines = []
    for step in range(1, 13):
        n = 512
        prompt = float(rng.uniform(150, 220))
        mean = float(rng.uniform(300, 900))
        mx = float(min(2048, round(mean * rng.uniform(1.6, 2.8))))
        per_engine = n // 8
        gen = (0.021 * mx + 0.00004 * per_engine * mean * 1.0 + 2e-6 * per_engine * prompt) * rng.normal(1, 0.02)
        reward = (1.5 + 1.1e-5 * n * (prompt + mx)) * rng.normal(1, 0.02)
        tokens = n * mean
        old_lp, ref = 0.03e-3 * tokens * rng.normal(1, 0.02), 0.025e-3 * tokens * rng.normal(1, 0.02)
        adv = 0.4 * rng.normal(1, 0.05)
        upd = (25 + 1.4e-4 * tokens) * rng.normal(1, 0.02)
        sync = 3.5 * rng.normal(1, 0.03)
        step_s = gen + reward + old_lp + ref + adv + upd + sync + 1.2 * rng.normal(1, 0.1)
        d = {
            "training/global_step": step,
            "training/epoch": 0,
            "critic/score/mean": float(rng.uniform(0, 1)),
            "critic/rewards/mean": float(rng.uniform(0, 1)),
            "response_length/mean": round(mean, 2),
            "response_length/max": mx,
            "response_length/min": 12.0,
            "response_length/clip_ratio": 0.01,
            "prompt_length/mean": round(prompt, 2),
            "prompt_length/max": 512.0,
            "timing_s/gen": round(gen, 3),
            "timing_s/reward": round(reward, 3),
            "timing_s/old_log_prob": round(old_lp, 3),
            "timing_s/ref": round(ref, 3),
            "timing_s/adv": round(adv, 3),
            "timing_s/update_actor": round(upd, 3),
            "timing_s/update_weights": round(sync, 3),
            "timing_s/step": round(step_s, 3),
            "perf/total_num_tokens": int(round(n * (prompt + mean))),
            "perf/time_per_step": round(step_s, 3),
            "perf/throughput": round(n * (prompt + mean) / step_s / 8, 1),
        }
        lines.append(json.dumps({"step": step, "data": d}))
        if step == 6:  # a validation record: no timing keys, skipped by the reader
            lines.append(json.dumps({"step": step, "data": {"val-core/gsm8k/reward/mean@1": 0.41}}))
    (HERE / "verl_metrics.jsonl").write_text("\n".join(lines) + "\n")

    lines = []
    for _ in range(1, 11):
        n = 256
        mean = float(rng.uniform(200, 1200))
        gen = (0.02 * mean + 0.00005 * (n // 4) * mean) * rng.normal(1, 0.02)
        mk = (4 + 1.0e-5 * n * mean) * rng.normal(1, 0.02)
        ppo = (18 + 1.6e-4 * n * mean) * rng.normal(1, 0.02)
        bc = 2.8 * rng.normal(1, 0.03)
        total = gen + mk + ppo + bc + 0.9 * rng.normal(1, 0.1)
        d = {
            "policy_loss": 0.01,
            "kl": 0.002,
            "actor_lr": 1e-6,
            "rollout/reward_mean": float(rng.uniform(0, 1)),
            "rollout/response_length_mean": round(mean, 2),
            "rollout/truncated_rate": 0.0,
            "rollout/num_samples": float(n),
            "timing/generation": round(gen, 3),
            "timing/make_experience": round(mk, 3),
            "timing/ppo_train": round(ppo, 3),
            "timing/broadcast": round(bc, 3),
            "timing/step_total": round(total, 3),
            "generated_samples": ["a sample", 0.5],
        }
        lines.append(json.dumps(d))
    (HERE / "openrlhf_metrics.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
