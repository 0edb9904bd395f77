"""Issue 14's benchmark target on hand-made worker results: the fastest runtime that passes fidelity vs fp32 eager,
at the same batcher, paired by round."""

from __future__ import annotations

import pytest

from rlsim.bench.scoring_config import BenchScoringConfig, Cell
from rlsim.bench.scoring_report import markdown_summary
from rlsim.bench.scoring_summary import add_fidelity, summarize

EAGER = Cell("eager", "fixed", batch_size=32)
BF16 = Cell("eager-bf16", "fixed", batch_size=32)
INT8 = Cell("ort-int8", "fixed", batch_size=32)
EAGER_SORTED = Cell("eager", "sorted", batch_size=32)
BF16_SORTED = Cell("eager-bf16", "sorted", batch_size=32)


def run(seq_s: float) -> dict:
    wall = 64 / seq_s
    return {
        "wall_s": wall, "sequences": 64, "real_tokens": 8192, "padded_tokens": 8192, "padding_waste": 0.0,
        "batch_sizes": [32, 32], "batch_latencies_s": [wall / 2, wall / 2], "flops": 64 * 2.9e9, "load_s": 1.0,
        "warmup_s": 2.0, "compile_s": 0.0, "timed_compile_s": 0.0, "rewards": [0.1],
    }  # fmt: skip


def result(bf16_speeds: list[float], fidelity: dict) -> dict:
    cells = [EAGER, BF16, INT8, EAGER_SORTED, BF16_SORTED]
    cfg = BenchScoringConfig(runtimes=["eager"], repeats=3)
    raw = {
        EAGER.label: [run(50), run(40), run(60)],
        BF16.label: [run(s) for s in bf16_speeds],
        INT8.label: [run(180), run(150), run(200)],
        EAGER_SORTED.label: [run(50), run(40), run(60)],
        BF16_SORTED.label: [run(s) for s in bf16_speeds],
    }
    gemm = [{"gflops": 120.0, "peaks": {"bf16": {"gflops": 600.0}, "int8": {"gflops": 900.0}}}]
    out = summarize(cfg, cells, raw, gemm, {"sequences": 64, "mean_tokens": 128.0, "max_tokens": 128})
    add_fidelity(out, fidelity)
    return out


OK = {"eager": {"ok": True, "pair_flip_rate": 0.0}, "eager-bf16": {"ok": True, "pair_flip_rate": 0.003}}
INT8_FAILS = {**OK, "ort-int8": {"ok": False, "pair_flip_rate": 0.116}}


def test_the_fastest_passing_runtime_is_compared_with_eager_at_each_batcher() -> None:
    # bf16 runs 1.6x eager in every round; int8 is faster still but fails fidelity, so it is not the one taken.
    out = result([80, 64, 96], INT8_FAILS)
    entries = {e["baseline"]: e for e in out["targets"]["fastest_passing_vs_eager"]}
    assert set(entries) == {EAGER.label, EAGER_SORTED.label}
    fixed = entries[EAGER.label]
    assert (fixed["cell"], fixed["runtime"], fixed["pair_flip_rate"]) == (BF16.label, "eager-bf16", 0.003)
    assert fixed["paired_ratio"] == pytest.approx(1.6) and fixed["paired_ratio_ci_low"] == pytest.approx(1.6)
    assert fixed["meets_target"] and fixed["ci_low_meets_target"]
    assert entries[EAGER_SORTED.label]["cell"] == BF16_SORTED.label  # the same batcher, not another
    assert "fastest that passes fidelity: `eager-bf16/fixed/32` vs `eager/fixed/32`: paired 1.60 [1.60, 1.60]" in (
        markdown_summary(out)
    )


def test_a_ratio_above_target_whose_ci_reaches_below_is_said_apart() -> None:
    # Per-round ratios 1.9, 1.3, 1.7: geometric mean 1.61 >= 1.5, but the paired CI reaches well below 1.5.
    fixed = result([95, 52, 102], INT8_FAILS)["targets"]["fastest_passing_vs_eager"][0]
    assert fixed["paired_ratio"] == pytest.approx((1.9 * 1.3 * 1.7) ** (1 / 3))
    assert fixed["meets_target"] and not fixed["ci_low_meets_target"]


def test_when_only_eager_passes_no_runtime_meets_the_target() -> None:
    only_eager = {"eager": {"ok": True}, "eager-bf16": {"ok": False}, "ort-int8": {"ok": False}}
    entry = result([80, 64, 96], only_eager)["targets"]["fastest_passing_vs_eager"][0]
    assert entry["cell"] is None and not entry["meets_target"]


def test_each_cell_carries_its_own_precisions_peak_fraction() -> None:
    cells = {c["cell"]: c for c in result([80, 64, 96], INT8_FAILS)["cells"]}
    # 64 x 2.9 GFLOP at 50/40/60 seq/s = 145/116/174 GFLOP/s; fp32 peak 120 -> mean 1.208 (the FLOP count is made up)
    assert cells[EAGER.label]["precision"] == "fp32"
    assert cells[EAGER.label]["peak_fraction"] == pytest.approx(cells[EAGER.label]["gemm_fraction"])
    # bf16 at 80/64/96 seq/s = 232/185.6/278.4 GFLOP/s of a 600 GFLOP/s bf16 peak: mean 0.3867
    assert cells[BF16.label]["peak_fraction"] == pytest.approx(2.9e9 * 80 / 600e9)
    assert cells[INT8.label]["precision"] == "int8"
    assert cells[INT8.label]["peak_fraction"] == pytest.approx(2.9e9 * (180 + 150 + 200) / 3 / 900e9)


def test_the_benchmark_script_judges_another_target_from_the_same_ratios() -> None:
    # benchmarks/bench_fidelity_speed.py --target-ratio: issue 30 asks 2.5x of the same paired ratios issue 14 asks
    # 1.5x of. Per-round ratios 1.9, 1.3, 1.7 (paired 1.61): 1.5x met but not at the CI's low end; 2.5x not met.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fidelity_speed.py"
    spec = importlib.util.spec_from_file_location("bench_fidelity_speed", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    entries = result([95, 52, 102], INT8_FAILS)["targets"]["fastest_passing_vs_eager"][:1]
    grids = {"fixed128": {"out": "x", "fastest_passing_vs_eager": entries}}
    assert (script.verdict(grids, 1.5)["meets_target"], script.verdict(grids, 1.5)["ci_low_meets_target"]) == (
        True,
        False,
    )
    assert not script.verdict(grids, 2.5)["meets_target"]
    nobody = {"g": {"out": "x", "fastest_passing_vs_eager": [{"cell": None, "baseline": "eager/fixed/32"}]}}
    assert not script.verdict(nobody, 1.0)["meets_target"]
