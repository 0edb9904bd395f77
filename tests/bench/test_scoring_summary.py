"""The benchmark's statistics on hand-made worker results with known answers."""

from __future__ import annotations

import pytest

from rlsim.bench.scoring_config import BenchScoringConfig, Cell
from rlsim.bench.scoring_report import csv_text, markdown_summary, table
from rlsim.bench.scoring_summary import summarize

FIXED = Cell("rt", "fixed", batch_size=8)
SORTED = Cell("rt", "sorted", batch_size=8)


def run(seq_s: float, rewards: list[float]) -> dict:
    """One repeat: 100 sequences at ``seq_s``; 50 GFLOP of model work; two batches."""
    wall = 100 / seq_s
    return {
        "wall_s": wall, "sequences": 100, "real_tokens": 20_000, "padded_tokens": 25_000, "padding_waste": 0.2,
        "batch_sizes": [50, 50], "batch_latencies_s": [wall / 2, wall / 2], "flops": 50e9, "load_s": 1.0,
        "warmup_s": 2.0, "compile_s": 0.0, "timed_compile_s": 0.0, "rewards": rewards,
    }  # fmt: skip


@pytest.fixture()
def result() -> dict:
    cfg = BenchScoringConfig(runtimes=["eager"], baseline="eager/fixed/32")
    cfg = cfg.model_copy(update={"baseline": FIXED.label, "repeats": 3})
    raw = {
        FIXED.label: [run(10, [0.1, 0.2]), run(11, [0.1, 0.2]), run(12, [0.1, 0.2])],
        SORTED.label: [run(20, [0.1, 0.25]), run(22, [0.1, 0.2]), run(24, [0.1, 0.2])],
    }
    gemm = [{"gflops": 90.0}, {"gflops": 110.0}]
    return summarize(cfg, [FIXED, SORTED], raw, gemm, {"sequences": 100, "mean_tokens": 200.0, "max_tokens": 300})


def test_cell_statistics(result: dict) -> None:
    assert result["gemm_gflops"] == pytest.approx(100.0)
    fixed = result["cells"][0]
    s = fixed["throughput_seq_s"]
    # [10, 11, 12]: mean 11, s = 1, se = 1/sqrt(3) = 0.57735, t(0.975, 2) = 4.302653 -> +/- 2.484138.
    assert s["mean"] == pytest.approx(11.0)
    assert (s["ci_low"], s["ci_high"]) == (pytest.approx(8.515862, abs=1e-5), pytest.approx(13.484138, abs=1e-5))
    assert s["ci_half_width_pct"] == pytest.approx(100 * 2.484138 / 11, abs=1e-4)
    assert s["cv"] == pytest.approx(1 / 11)
    # 200 real tokens per sequence -> tokens/s = 200 x seq/s.
    assert fixed["throughput_tok_s"]["mean"] == pytest.approx(2200.0)
    # 50 GFLOP in 10, 9.09, 8.33 s = 5, 5.5, 6 GFLOP/s of a 100 GFLOP/s GEMM rate -> mean 0.055.
    assert fixed["gemm_fraction"] == pytest.approx(0.055)
    # Batch latency = wall/2: 5, 4.545, 4.167 s (each twice); the median of the six is 4.545 s.
    assert fixed["latency_ms"]["p50"] == pytest.approx(1000 * 100 / 11 / 2)
    assert fixed["padding_waste"] == 0.2 and fixed["mean_batch_size"] == 50.0
    assert fixed["reward_max_abs_diff"] == 0.0
    # The sorted cell's first repeat returned 0.25 where the runtime's first cell said 0.2.
    assert result["cells"][1]["reward_max_abs_diff"] == pytest.approx(0.05)


def test_comparison_against_baseline(result: dict) -> None:
    (cmp,) = result["comparisons"]
    assert (cmp["cell"], cmp["baseline"]) == (SORTED.label, FIXED.label)
    # Means 22 / 11 = 2; the CIs [17.0, 27.0] and [8.5, 13.5] are apart; 3 vs 3 fully separated -> p = 2/20.
    assert cmp["ratio"] == pytest.approx(2.0)
    assert cmp["ratio_ci_low"] < 2.0 < cmp["ratio_ci_high"]
    assert cmp["ci_overlap"] is False
    assert cmp["p_value"] == pytest.approx(0.1)


def test_paired_comparison_by_round(result: dict) -> None:
    (cmp,) = result["comparisons"]
    # Round by round the sorted cell ran 20/10, 22/11, 24/12 = exactly 2x the fixed one: what the rounds
    # shared (11 and 12 seq/s rounds were faster for both) cancels, so the paired interval is [2, 2]
    # and the paired t test has no spread left (p = 0), where Fieller's is wide and Mann-Whitney p = 0.1.
    assert (cmp["pairs"], cmp["paired_ratio"]) == (3, pytest.approx(2.0))
    assert (cmp["paired_ratio_ci_low"], cmp["paired_ratio_ci_high"]) == (pytest.approx(2.0), pytest.approx(2.0))
    assert cmp["p_value_paired"] == 0.0 and cmp["p_value"] == pytest.approx(0.1)
    assert cmp["sign_flip_p"] == pytest.approx(2 / 8)  # the exact test's floor with 3 rounds
    assert cmp["ratio_method"].startswith("unpaired") and cmp["paired_method"].startswith("paired")
    md = markdown_summary(result)
    assert "| 2.00 [2.00, 2.00] | 0.000 |" in md and "| baseline | - |" in md


def test_paired_ratio_with_round_noise_known_answer() -> None:
    cfg = BenchScoringConfig(runtimes=["eager"]).model_copy(update={"baseline": FIXED.label, "repeats": 3})
    # Per-round ratios e^0.1, e^0.2, e^0.3 on baselines 10, 20, 40 seq/s: geometric mean e^0.2,
    # interval exp(0.2 +/- 4.302653 x 0.1 / sqrt 3) = exp(0.2 +/- 0.248414).
    import math

    base = [10.0, 20.0, 40.0]
    raw = {
        FIXED.label: [run(x, [0.1]) for x in base],
        SORTED.label: [run(x * math.exp(d), [0.1]) for x, d in zip(base, (0.1, 0.2, 0.3), strict=True)],
    }
    result = summarize(
        cfg, [FIXED, SORTED], raw, [{"gflops": 100.0}], {"sequences": 100, "mean_tokens": 1, "max_tokens": 1}
    )
    (cmp,) = result["comparisons"]
    assert cmp["paired_ratio"] == pytest.approx(math.exp(0.2))
    assert cmp["paired_ratio_ci_low"] == pytest.approx(math.exp(0.2 - 0.248414), rel=1e-5)
    assert cmp["paired_ratio_ci_high"] == pytest.approx(math.exp(0.2 + 0.248414), rel=1e-5)


def test_targets(result: dict) -> None:
    t = result["targets"]
    (gain,) = t["best_batcher_vs_fixed"]
    assert gain["cell"] == SORTED.label and gain["meets_target"] is True
    assert t["best_cell_vs_baseline"]["cell"] == SORTED.label
    assert t["best_cell_vs_baseline"]["meets_target"] is True  # exactly 2.0x
    assert t["ci_half_width_max_pct"] == pytest.approx(22.58, abs=0.01)
    assert t["ci_within_target"] is False


def test_required_json_keys(result: dict) -> None:
    assert isinstance(result["gemm_gflops"], float)
    for cell in result["cells"]:
        for key in ("runtime", "batcher", "batch_size", "padding_waste", "gemm_fraction", "throughput_seq_s"):
            assert key in cell
        assert set(cell["throughput_seq_s"]) >= {"mean", "ci_low", "ci_high"}
    for key in ("cell", "baseline", "ratio", "ratio_ci_low", "ratio_ci_high", "ci_overlap", "p_value"):
        assert key in result["comparisons"][0]


def test_table_and_csv_render(result: dict) -> None:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(table(result))
    text = console.export_text()
    assert "rt/sorted/8" in text and "2.00" in text and "baseline" in text
    lines = csv_text(result).splitlines()
    assert lines[0].startswith("cell,runtime,batcher") and len(lines) == 3


def test_markdown_summary_has_a_row_per_cell_and_the_targets(result: dict) -> None:
    md = markdown_summary(result)
    assert "| rt/fixed/8 | 11.0 [8.5, 13.5] | 22.6 |" in md
    assert "| rt/sorted/8 | 22.0 [17.0, 27.0] |" in md and "| 2.00 [" in md
    assert "best cell `rt/sorted/8` is 2.00x the baseline" in md


def test_unbounded_ratio_is_null_in_strict_json() -> None:
    import json

    cfg = BenchScoringConfig(runtimes=["eager"]).model_copy(update={"baseline": FIXED.label, "repeats": 2})
    # Baseline [1, 10]: mean 5.5, se 4.5, t(0.975, 1) = 12.71 -> zero is well inside its interval, so
    # Fieller's interval for any ratio over it is unbounded.
    raw = {FIXED.label: [run(1, [0.1]), run(10, [0.1])], SORTED.label: [run(20, [0.1]), run(21, [0.1])]}
    result = summarize(
        cfg, [FIXED, SORTED], raw, [{"gflops": 100.0}], {"sequences": 100, "mean_tokens": 1, "max_tokens": 1}
    )
    (cmp,) = result["comparisons"]
    assert cmp["ratio_ci_low"] is None and cmp["ratio_ci_high"] is None
    json.dumps(result, allow_nan=False)  # raises on inf/nan
    assert "[-inf, inf]" in markdown_summary(result)
    assert result["targets"]["best_batcher_vs_fixed"][0]["ci_low_meets_target"] is False
