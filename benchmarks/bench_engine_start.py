"""What ``policy.engine_process: inline`` saves: vLLM engine start and close, separate against inline, in fresh
processes, interleaved by round.

Each measurement is a fresh interpreter (``--one MODE``) that builds the built-in ``tiny-llama`` policy's
``VllmGenerator`` (``rlsim/rollout/vllm_generator.py``) with ``engine_inline`` off (``separate``: vLLM's own
EngineCore and worker processes) or on (``inline``: both in this process, ``rlsim/rollout/vllm_processes.py``)
and closes it; imports are timed apart from the engine. Rounds alternate the order of the two modes.

    python benchmarks/bench_engine_start.py            # writes benchmarks/results/bench_engine_start.json
    python benchmarks/bench_engine_start.py --rounds 2 --out /tmp/engine.json

The last stdout line is the result JSON (with the machine's fingerprint).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bench_engine_start.json"
MODES = ("separate", "inline")


def one(mode: str) -> dict[str, float]:
    """In this process: import, start and close one engine; seconds of each."""
    t0 = time.perf_counter()
    from rlsim.models import resolve_policy
    from rlsim.rollout.generator import GeneratorSettings
    from rlsim.rollout.vllm_generator import VllmGenerator

    policy = resolve_policy("tiny-llama")
    t1 = time.perf_counter()
    gen = VllmGenerator(policy, GeneratorSettings(temperature=0.0, seed=0, engine_inline=mode == "inline"))
    t2 = time.perf_counter()
    gen.close()
    return {"imports_s": t1 - t0, "start_s": t2 - t1, "close_s": time.perf_counter() - t2}


def measure(mode: str) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, __file__, "--one", mode], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    if proc.returncode != 0:
        raise SystemExit(f"the {mode} engine failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one)))
        return 0
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    for k in range(args.rounds):
        for mode in MODES if k % 2 == 0 else MODES[::-1]:
            runs[mode].append(measure(mode))
    median = {m: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for m, rs in runs.items()}
    result = {
        "benchmark": "engine_start",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python benchmarks/bench_engine_start.py " + " ".join(argv),
        "runs": runs,
        "median": median,
        "saved_per_engine_s": median["separate"]["start_s"]
        + median["separate"]["close_s"]
        - median["inline"]["start_s"]
        - median["inline"]["close_s"],
        "machine": machine_fingerprint(),
    }
    atomic_write_json(args.out, result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
