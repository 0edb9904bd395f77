"""Which precision each runtime computes in, from the scoring registry; a cell's fraction of its own peak."""

from __future__ import annotations

import pytest

from rlsim.bench.runtime_precision import needed_precisions, runtime_precision
from rlsim.bench.scoring_config import Cell
from rlsim.bench.scoring_summary import cell_summary
from rlsim.hardware.peaks import peak_fraction


def test_precisions_come_from_the_registry() -> None:
    assert runtime_precision("eager-bf16") == "bf16" and runtime_precision("native-int8-static") == "int8"
    assert runtime_precision("http", server_runtime="ort-int8") == "int8"  # the server's runtime decides
    assert needed_precisions(["eager", "ort-int8", "eager-bf16", "native-int8"]) == ["bf16", "int8"]
    assert needed_precisions(["eager", "ort", "http"]) == []
    assert runtime_precision("my-plugin-runtime") is None  # not registered here: no peak, not an error
    # A verifier and a sandbox do no model arithmetic: no precision, no peak (their cells read "-").
    assert runtime_precision("function") is None and runtime_precision("sandbox") is None
    assert needed_precisions(["eager", "function", "sandbox"]) == []


def test_peak_fraction_arithmetic() -> None:
    # 60 GFLOP of model work in 2 s = 30 GFLOP/s; of a 600 G op/s int8 peak that is 0.05.
    assert peak_fraction(60e9, 2.0, 600.0) == pytest.approx(0.05)
    run = {
        "wall_s": 2.0, "sequences": 64, "real_tokens": 8192, "padded_tokens": 8192, "padding_waste": 0.0,
        "batch_sizes": [32, 32], "batch_latencies_s": [1.0, 1.0], "flops": 60e9, "load_s": 1.0, "warmup_s": 2.0,
        "compile_s": 0.0, "timed_compile_s": 0.0, "rewards": [0.1],
    }  # fmt: skip
    cell = Cell("ort-int8", "fixed", batch_size=32)
    summary = cell_summary(cell, [run, {**run, "wall_s": 4.0}], 120.0, [0.1], "int8", {"gflops": 600.0})
    # Repeats at 30 and 15 GFLOP/s: of fp32's 120 -> 0.25 and 0.125; of int8's 600 -> 0.05 and 0.025.
    assert summary["gemm_fraction"] == pytest.approx(0.1875)
    assert summary["peak_fraction"] == pytest.approx(0.0375) and summary["precision"] == "int8"
    skipped = cell_summary(cell, [run, run], 120.0, [0.1], "bf16", {"skipped": "no flag"})
    assert skipped["peak_fraction"] is None and skipped["gemm_fraction"] == pytest.approx(0.25)
