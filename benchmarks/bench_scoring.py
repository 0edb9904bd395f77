"""The scoring benchmark behind the committed results in ``benchmarks/results/bench_scoring/``.

Workload (the issue's): 128 texts, prompt 32 tokens + response lognormal (mean 200 tokens,
sigma 0.6, clipped to 16..512), seed 0, on ``minilm-rm``. Grid: every CPU runtime x
{fixed, sorted} at batch sizes 8 and 32, and token-budget at 8192 tokens; 5 repeats per cell, each
in a fresh process, rounds interleaved; baseline eager/fixed/32.

    .venv/bin/python benchmarks/bench_scoring.py                    # the full grid (about an hour here)
    .venv/bin/python benchmarks/bench_scoring.py --runtimes eager,ort,native   # any extra flag is passed on
    .venv/bin/python benchmarks/bench_scoring.py --quick            # smoke run (about a minute) into quick/

Run it on an otherwise idle machine: other processes on the same cores widen every interval.
Outputs: results.json (the last stdout line is the same JSON), cells.csv, samples.csv, summary.md
(the README's headline table), throughput.png, throughput_vs_batch.png, padding_waste.png.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "bench_scoring"
GRID = [
    "--model", "minilm-rm",
    "--runtimes", "eager,compile,ort,ort-int8,native,native-int8",
    "--batchers", "fixed,sorted,token-budget",
    "--batch-sizes", "8,32",
    "--budgets", "8192",
    "--repeats", "5",
    "--warmup", "1",
    "--count", "128",
    "--seed", "0",
    "--baseline", "eager/fixed/32",
]  # fmt: skip


def main(extra: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from rlsim.cli.main import main as rlsim_main

    if "--quick" in extra:
        return rlsim_main(["bench", "scoring", "--out", str(OUT / "quick"), *extra])
    return rlsim_main(["bench", "scoring", *GRID, "--out", str(OUT), *extra])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
