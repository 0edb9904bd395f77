"""C++ the language vs ONNX Runtime the runtime (issue 2, item 5), as the paper separated them.

The same fused MiniLM graph, the same random token ids (batch x 128), the same 2 threads, timed
three ways, each repeat a fresh process, rounds interleaved:

- ``cpp``: the standalone ``rlsim_native_bench`` (the engine's C++ with no Python at all);
- ``pybind``: the same engine through ``rlsim._native`` from Python;
- ``ort-python``: ``onnxruntime.InferenceSession`` (ORT's own Python binding).

If ``cpp`` ~ ``pybind`` ~ ``ort-python``, the speed comes from ONNX Runtime, not from C++.

    .venv/bin/python benchmarks/bench_native_cpp.py [--repeats 5] [--batches 1,32]

Writes benchmarks/results/bench_native_cpp.json; the last stdout line is that JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "bench_native_cpp.json"
SEQ, THREADS, VOCAB = 128, 2, 30000

# One timed pass in a fresh interpreter: warm-up, then `iters` runs; prints seq/s.
PY_WORKER = (
    f"VOCAB, SEQ, THREADS = {VOCAB}, {SEQ}, {THREADS}\n"
    + r"""
import sys, time, numpy as np
mode, model, lib, batch, iters = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(0)
ids = rng.integers(1, VOCAB, size=(batch, SEQ), dtype=np.int64)
mask = np.ones_like(ids)
if mode == "pybind":
    from rlsim import _native
    eng = _native.Engine(model, lib, intra_op_threads=THREADS, inter_op_threads=1, spinning=True)
    run = lambda: eng.run(ids, mask)
else:
    import onnxruntime as ort
    so = ort.SessionOptions(); so.intra_op_num_threads = THREADS; so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in names: feed["token_type_ids"] = np.zeros_like(ids)
    run = lambda: sess.run(None, feed)
for _ in range(3): run()
t0 = time.perf_counter()
for _ in range(iters): run()
print(batch * iters / (time.perf_counter() - t0))
"""
)


def one_run(mode: str, model: str, lib: str, batch: int, iters: int) -> float:
    if mode == "cpp":
        from rlsim.scoring.ort_library import native_bench_path

        cmd = [str(native_bench_path()), "--model", model, "--ort-library", lib, "--batch", str(batch),
               "--seq", str(SEQ), "--warmup", "3", "--iterations", str(iters), "--threads", str(THREADS),
               "--vocab", str(VOCAB)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
        return float(json.loads(out.strip().splitlines()[-1])["seq_per_s"])
    cmd = [sys.executable, "-c", PY_WORKER, mode, model, lib, str(batch), str(iters)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    return float(out.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from rlsim.fingerprint import machine_fingerprint
    from rlsim.io import atomic_write_json
    from rlsim.metrics.stats import ci_overlap, mann_whitney_p, mean_ci, ratio_ci
    from rlsim.models import resolve_reward_model
    from rlsim.scoring.export import export_reward_model
    from rlsim.scoring.ort_library import find_ort_library

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--batches", default="1,32")
    args = p.parse_args(argv)
    model = str(export_reward_model(resolve_reward_model("minilm-rm")).optimized)
    lib = str(find_ort_library())
    modes = ["cpp", "pybind", "ort-python"]
    samples: dict[str, list[float]] = {}
    for r in range(args.repeats):
        for batch in [int(b) for b in args.batches.split(",")]:
            iters = max(4, 256 // batch)
            for mode in modes:
                key = f"{mode}/b{batch}"
                samples.setdefault(key, []).append(one_run(mode, model, lib, batch, iters))
                print(f"repeat {r + 1}/{args.repeats} {key}: {samples[key][-1]:.1f} seq/s", file=sys.stderr)
    cells = {k: mean_ci(v).as_dict() | {"samples": v} for k, v in samples.items()}
    comparisons = []
    for key, vals in samples.items():
        mode, batch = key.split("/")
        if mode == "cpp":
            continue
        base = samples[f"cpp/{batch}"]
        rc = ratio_ci(vals, base)
        a, b = cells[key], cells[f"cpp/{batch}"]
        overlap = ci_overlap(a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"])
        comparisons.append({"cell": key, "baseline": f"cpp/{batch}", "ratio": rc.ratio, "ratio_ci_low": rc.ci_low,
                            "ratio_ci_high": rc.ci_high, "p_value": mann_whitney_p(vals, base),
                            "ci_overlap": overlap})  # fmt: skip
    result = {"benchmark": "native_cpp_vs_python", "model": "minilm-rm (fused graph)", "seq": SEQ,
              "threads": THREADS, "repeats": args.repeats, "unit": "sequences/s",
              "ci": "95% t-interval of the mean over fresh-process repeats; ratio CI: Fieller",
              "cells": cells, "comparisons": comparisons}  # fmt: skip
    result["machine"] = machine_fingerprint()
    atomic_write_json(OUT, result)
    print(json.dumps(result, default=lambda x: None if x != x else x))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
