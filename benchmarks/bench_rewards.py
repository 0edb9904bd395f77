"""What rewards that are no model cost here (issue 29): the sandbox with its isolation on and off, and the
verifier pool's throughput against its worker count.

    python benchmarks/bench_rewards.py                       # writes benchmarks/results/bench_rewards.json
    python benchmarks/bench_rewards.py --programs 16 --calls 64 --out /tmp/rewards.json   # a short check

Sandbox: ``--programs`` bank programs (rlsim.rewards.program_bank, chosen by length as for responses of 16 to
1600 characters) run through the ``sandbox`` runtime with 1 worker, isolation on then off, interleaved in
``--rounds`` rounds; programs per core-second = programs / (CPU seconds of this process's children). Verifier:
``--calls`` calls of the built-in math checker (a problem in the prompt, a boxed answer in a response of ~300
characters) through the ``function`` runtime with 1, 2 and 4 workers; calls per wall second. Each cell's
median over rounds is reported with the machine's fingerprint; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402
from rlsim.models import resolve_reward_model  # noqa: E402
from rlsim.scoring import ScorerSettings, make_scorer  # noqa: E402


def children_cpu_s() -> float:
    t = os.times()
    return t.children_user + t.children_system


def sandbox_cell(isolate: bool, texts: list[str]) -> dict[str, float]:
    options = {"workers": 1, "isolate": isolate}
    scorer = make_scorer("sandbox", resolve_reward_model("minilm-rm"), ScorerSettings(options=options))
    try:
        cpu0, t0 = children_cpu_s(), time.perf_counter()
        rewards = scorer.score_batch(texts)
        wall, cpu = time.perf_counter() - t0, children_cpu_s() - cpu0
    finally:
        scorer.close()
    return {"programs": len(texts), "wall_s": wall, "cpu_s": cpu, "programs_per_core_s": len(texts) / cpu,
            "passed": float(rewards.sum())}  # fmt: skip


def verifier_cell(workers: int, calls: int) -> dict[str, float]:
    scorer = make_scorer("function", resolve_reward_model("minilm-rm"), ScorerSettings(options={"workers": workers}))
    try:
        prompts = [f"What is {i} * 7 + 3/4?" for i in range(calls)]
        responses = [("Let me think. " * 20) + f"\\boxed{{{i * 7} + \\frac{{3}}{{4}}}}" for i in range(calls)]
        scorer.score_pairs(prompts[:workers], responses[:workers])  # each worker imports sympy once
        t0 = time.perf_counter()
        rewards = scorer.score_pairs(prompts, responses)
        wall = time.perf_counter() - t0
    finally:
        scorer.close()
    return {"workers": workers, "calls": calls, "wall_s": wall, "calls_per_s": calls / wall,
            "correct": float(rewards.sum())}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=48)
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_rewards.json")
    args = ap.parse_args()
    texts = ["x" * int(16 * 100 ** (i / max(1, args.programs - 1))) for i in range(args.programs)]
    rows: dict[str, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for isolate in (True, False) if r % 2 == 0 else (False, True):  # interleaved, order alternating
            rows.setdefault(f"sandbox isolate={isolate}", []).append(sandbox_cell(isolate, texts))
        for workers in (1, 2, 4):
            rows.setdefault(f"verifier workers={workers}", []).append(verifier_cell(workers, args.calls))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    summary = {}
    for name, cells in rows.items():
        key = "programs_per_core_s" if name.startswith("sandbox") else "calls_per_s"
        summary[name] = {key: statistics.median(c[key] for c in cells), "rounds": cells}
    on, off = summary["sandbox isolate=True"], summary["sandbox isolate=False"]
    result = {"benchmark": "bench_rewards", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": " ".join(sys.argv), "machine": machine_fingerprint(), "cells": summary,
              "isolation_cost_ratio": off["programs_per_core_s"] / on["programs_per_core_s"]}  # fmt: skip
    atomic_write_json(args.out, result)
    print(json.dumps({k: ({n: {m: v for m, v in c.items() if m != "rounds"} for n, c in result["cells"].items()}
                          if k == "cells" else result[k]) for k in ("cells", "isolation_cost_ratio")}))  # fmt: skip


if __name__ == "__main__":
    main()
