"""What a generative judge costs in a real loop here (issue 29): its share of the pool's core-seconds per step against
the policy's, for two judge sizes (``tiny-llama``, ``small-llama``) and both readings (``verdict``: one prefill;
``score``: decoding ``--max-tokens``).

    python benchmarks/bench_genrm.py                          # writes benchmarks/results/bench_genrm.json
    python benchmarks/bench_genrm.py --steps 2 --rounds 1 --out /tmp/genrm.json   # a short check

Each cell is one ``rlsim run configs/reward_genrm.yaml`` in a fresh process (Ray, the tiny-llama policy on vLLM, the
judge on a vLLM engine of its own in the scoring actor, both engines inline, the sequential schedule: the judge works
after generation on the same cores, as verl's colocated reward mode takes turns); cells are interleaved in
``--rounds`` rounds. Per cell, over the steps after the first (warm): the judge's CPU seconds per step
(``cpu_s["scorer-0"]``), the policy engine's (``cpu_s["rollout"]``), the judge's share of the two, and the scoring
and generation phases' seconds; medians over steps and rounds, with the machine's fingerprint. The last stdout
line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402

CELLS = [(judge, mode) for judge in ("tiny-llama", "small-llama") for mode in ("verdict", "score")]


def run_cell(judge: str, mode: str, steps: int, max_tokens: int, out: Path) -> list[dict]:
    settings = {
        "steps": steps,
        "schedule": "sequential",
        "policy.engine_process": "inline",
        "reward.engine_process": "inline",
        "reward.genrm.judge": judge,
        "reward.genrm.mode": mode,
        "reward.genrm.max_tokens": max_tokens,
    }
    config = ROOT / "configs" / "reward_genrm.yaml"
    cmd = [sys.executable, "-m", "rlsim.cli.main", "run", str(config), "--out", str(out)]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return json.loads((out / "results.json").read_text())["steps"][1:]  # the first step warms the engines


def summarise(steps: list[dict]) -> dict[str, float]:
    judge = [s["cpu_s"]["scorer-0"] for s in steps]
    policy = [s["cpu_s"]["rollout"] for s in steps]
    med = statistics.median
    return {
        "steps": len(steps),
        "judge_cpu_s_per_step": med(judge),
        "policy_cpu_s_per_step": med(policy),
        "judge_share_of_judge_and_policy": med(j / (j + p) for j, p in zip(judge, policy, strict=True)),
        "score_s_per_step": med(s["time_s"]["score"] for s in steps),
        "generate_s_per_step": med(s["time_s"]["generate"] for s in steps),
        "step_s": med(s["time_s"]["total"] for s in steps),
        "judge_prompt_tokens_per_step": med(s["reward_outcomes"]["judge_prompt_tokens"] for s in steps),
        "judge_tokens_decoded_per_step": med(s["reward_outcomes"].get("judge_tokens_decoded", 0) for s in steps),
        "policy_tokens_generated_per_step": med(s["tokens"]["generated"] for s in steps),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4, help="steps per run; the first is left out (default 4)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each running every cell once (default 2)")
    ap.add_argument("--max-tokens", type=int, default=32, help="score mode: tokens the judge may decode (default 32)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_genrm.json")
    args = ap.parse_args()
    if args.steps < 2 or args.rounds < 1:
        ap.error("--steps must be at least 2 (the first is a warm-up) and --rounds at least 1")
    collected: dict[str, list[dict]] = {f"{judge}/{mode}": [] for judge, mode in CELLS}
    with tempfile.TemporaryDirectory(prefix="bench-genrm-") as tmp:
        for r in range(args.rounds):
            order = CELLS if r % 2 == 0 else CELLS[::-1]  # interleaved, alternating the order
            for judge, mode in order:
                print(f"round {r + 1}/{args.rounds}: judge {judge}, {mode}", file=sys.stderr, flush=True)
                out = Path(tmp) / f"{judge}-{mode}-{r}"
                collected[f"{judge}/{mode}"] += run_cell(judge, mode, args.steps, args.max_tokens, out)
    result = {
        "benchmark": "bench_genrm",
        "command": " ".join(["python", "benchmarks/bench_genrm.py", *sys.argv[1:]]),
        "machine": machine_fingerprint(),
        "settings": {"steps": args.steps, "rounds": args.rounds, "max_tokens": args.max_tokens},
        "cells": {name: summarise(steps) for name, steps in collected.items()},
    }
    atomic_write_json(args.out, result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
