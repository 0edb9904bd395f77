"""Issue 2's runtime benchmark: every runtime on MiniLM at a fixed 128 tokens per sequence.

Two grids of ``rlsim bench scoring`` (each repeat a fresh process, rounds interleaved, GEMM rate
measured in the same run):

- ``ranking``: eager, compile, ort, ort-int8, native, native-int8, http at batch 32 x 128 tokens,
  the paper's CPU comparison; every throughput also as a fraction of the GEMM rate.
- ``batch_sweep``: native vs ort at batch 1, 4, 16, 32, 64 (batch 1 shows per-call overhead).

    .venv/bin/python benchmarks/bench_runtimes.py              # both grids (about 20 minutes here)
    .venv/bin/python benchmarks/bench_runtimes.py ranking      # one grid

Outputs: benchmarks/results/bench_runtimes/<grid>/results.json (+ csv, md, png). Run on an idle machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "bench_runtimes"
# 32 prompt words + 94 response words + [CLS] + [SEP] = 128 MiniLM tokens for every text.
WORKLOAD = [
    "--set", "workload.prompt.kind=fixed", "--set", "workload.prompt.tokens=32",
    "--set", "workload.response={kind: fixed, tokens: 94}",
]  # fmt: skip
GRIDS = {
    "ranking": [
        "--runtimes", "eager,compile,ort,ort-int8,native,native-int8,http",
        "--batchers", "fixed", "--batch-sizes", "32", "--count", "96", "--repeats", "5",
        "--baseline", "eager/fixed/32",
    ],
    "batch_sweep": [
        "--runtimes", "ort,native",
        "--batchers", "fixed", "--batch-sizes", "1,4,16,32,64", "--count", "64", "--repeats", "4",
        "--baseline", "ort/fixed/32",
    ],
}  # fmt: skip


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from rlsim.cli.main import main as rlsim_main

    names = argv or list(GRIDS)
    for name in names:
        args = ["bench", "scoring", "--model", "minilm-rm", *GRIDS[name], *WORKLOAD, "--out", str(OUT / name)]
        rc = rlsim_main(args)
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
