"""Issue 2's runtime benchmark: every runtime on MiniLM at a fixed 128 tokens per sequence.

Two grids of ``rlsim bench scoring`` (each repeat a fresh process, rounds interleaved, GEMM rate
measured in the same run):

- ``ranking``: eager, compile, ort, ort-int8, native, native-int8, http at batch 32 x 128 tokens,
  the paper's CPU comparison; every throughput also as a fraction of the GEMM rate.
- ``batch_sweep``: native vs ort at batch 1, 4, 16, 32, 64 (batch 1 shows per-call overhead).
- ``fidelity``: issue 14's speed next to reward fidelity: the fp32 runtimes, dynamic and static int8,
  and bf16 where the CPU has it, at 32 x 128 tokens; each cell carries its runtime's within-group
  pair-flip rate against fp32 eager on the fidelity corpus (``rlsim.fidelity``).

    .venv/bin/python benchmarks/bench_runtimes.py              # both grids (about 20 minutes here)
    .venv/bin/python benchmarks/bench_runtimes.py ranking      # one grid
    .venv/bin/python benchmarks/bench_runtimes.py fidelity     # speed and fidelity (bf16 only where the CPU has it)

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
    "fidelity": [
        "--runtimes", "eager,ort,native,ort-int8,native-int8,ort-int8-static,native-int8-static,eager-bf16",
        "--batchers", "fixed", "--batch-sizes", "32", "--count", "64", "--repeats", "3",
        "--baseline", "eager/fixed/32",
    ],
}  # fmt: skip


def _runnable(args: list[str]) -> list[str]:
    """Drop runtimes this machine's hardware cannot run (bf16 without avx512_bf16/amx), saying so."""
    from rlsim.scoring import SCORERS

    i = args.index("--runtimes") + 1
    keep = []
    for name in args[i].split(","):
        reason = SCORERS.info(name).hardware_reason(name, "cpu")
        if reason:
            print(f"skipping {name}: {reason}", file=sys.stderr)
        else:
            keep.append(name)
    return [*args[:i], ",".join(keep), *args[i + 1 :]]


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from rlsim.cli.main import main as rlsim_main

    names = argv or list(GRIDS)
    for name in names:
        args = [
            "bench",
            "scoring",
            "--model",
            "minilm-rm",
            *_runnable(GRIDS[name]),
            *WORKLOAD,
            "--out",
            str(OUT / name),
        ]
        rc = rlsim_main(args)
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
