"""benchmarks/bench_async.py's summary: the paired async/overlapped ratio per placement, and its CI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_bench_async():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_async", ROOT / "benchmarks" / "bench_async.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(schedule: str, placement: str, per_hour: float) -> dict:
    return {"schedule": schedule, "placement": placement, "rollouts_trained_per_hour": per_hour}


def test_ratios_are_paired_within_repeats_with_a_ci_from_two_repeats() -> None:
    bench = load_bench_async()
    rows = [
        row("overlapped", "split-gen-score", 1000.0),
        row("async", "split-gen-score", 1400.0),
        row("overlapped", "split-gen-score", 1100.0),
        row("async", "split-gen-score", 1320.0),
        row("overlapped", "split-gen-score", 900.0),  # a third repeat whose async run never came
    ]
    out = bench.summarise(rows, ["split-gen-score"], ["overlapped", "async"])["split-gen-score"]
    assert out["ratio_async_over_overlapped"] == [1.4, 1.2]
    mean, low, high = out["ratio_mean_ci95"]
    assert mean == pytest.approx(1.3)
    # t(0.975, 1) = 12.706 x sd 0.1414 / sqrt 2 = 1.2706 half-width.
    assert (low, high) == pytest.approx((1.3 - 1.2706, 1.3 + 1.2706), abs=1e-3)
    one = bench.summarise(rows[:2], ["split-gen-score"], ["overlapped", "async"])["split-gen-score"]
    assert "ratio_mean_ci95" not in one  # one pair: no interval


def test_partial_rollouts_are_compared_with_overlapped_and_with_async_without_them() -> None:
    bench = load_bench_async()
    rows = [row(s, "shared", v) for s, v in [("overlapped", 1000.0), ("async", 1200.0), ("async-partial", 1320.0)]]
    rows += [row(s, "shared", v) for s, v in [("overlapped", 1000.0), ("async", 1000.0), ("async-partial", 1200.0)]]
    out = bench.summarise(rows, ["shared"], ["overlapped", "async", "async-partial"])["shared"]
    assert out["ratio_async_over_overlapped"] == [1.2, 1.0]
    assert out["ratio_async-partial_over_overlapped"] == [1.32, 1.2]
    assert out["ratio_async-partial_over_async"] == [1.1, 1.2]
    assert out["ratio_async-partial_over_async_mean_ci95"][0] == pytest.approx(1.15)
    assert out["ratio_mean_ci95"] == out["ratio_async_over_overlapped_mean_ci95"]


def test_the_scorer_beside_rollout_placement_moves_the_scorer_onto_the_rollout_cores() -> None:
    bench = load_bench_async()
    sets = bench.placement_sets("split-gen-score")
    assert sets[0] == "placement.preset=split" and sets[1].startswith("placement.scorer.cores=[")
    assert bench.placement_sets("shared") == ["placement.preset=shared"]
