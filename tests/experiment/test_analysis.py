"""Statistics over repeats (means with CIs, ratios, significance in words) with hand-worked answers."""

from __future__ import annotations

import math

import pytest

from rlsim.experiment.analysis import (
    accounting_summary,
    compare,
    estimate,
    ratio_minus_one,
    runtime_figures,
    smallest_p,
)
from rlsim.experiment.capacity import per_repeat
from tests.helpers.recorded import POOL_CORES, rows

T_975_DF2 = 4.302652729911275  # Student t quantile, 97.5 %, 2 degrees of freedom


def test_estimate_is_the_t_interval_of_the_repeats() -> None:
    # mean 2.1, sample sd 0.1, half-width t(2) x 0.1 / sqrt(3)
    e = estimate([2.0, 2.1, 2.2])
    half = T_975_DF2 * 0.1 / math.sqrt(3)
    assert e["mean"] == pytest.approx(2.1)
    assert (e["ci_low"], e["ci_high"]) == pytest.approx((2.1 - half, 2.1 + half), abs=1e-6)
    assert e["n"] == 3


def test_estimate_without_two_samples_has_no_ci() -> None:
    assert estimate([1.5]) == {"mean": 1.5, "ci_low": None, "ci_high": None, "n": 1, "method": "single sample"}
    assert estimate([])["mean"] is None


def test_ratio_minus_one_of_constant_samples_is_exact() -> None:
    # alone 2 tokens/s, together 1 token/s in every repeat: the same work takes 100 % longer together.
    r = ratio_minus_one([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert (r["mean"], r["ci_low"], r["ci_high"]) == (1.0, 1.0, 1.0)


def test_ratio_minus_one_with_a_zero_denominator_is_undefined_not_an_error() -> None:
    r = ratio_minus_one([1.0, 2.0], [0.0, 0.0])
    assert r["mean"] is None and "undefined" in r["method"]


def test_smallest_reachable_mann_whitney_p() -> None:
    # Exact two-sided test: the most extreme of C(n_a + n_b, n_a) orderings, counted on both sides.
    assert smallest_p(2, 2) == pytest.approx(2 / 6)
    assert smallest_p(3, 3) == pytest.approx(2 / 20)
    assert smallest_p(4, 4) == pytest.approx(2 / 70)


def test_compare_separated_samples_is_significant() -> None:
    c = compare([1, 2, 3, 4, 5], [11, 12, 13, 14, 15])
    assert c["ci_overlap"] is False
    assert c["mann_whitney_p"] == pytest.approx(2 / 252, abs=1e-6)  # stored to 6 decimals
    assert c["significant"] is True and c["words"].startswith("significant")


def test_compare_interleaved_samples_is_not_significant() -> None:
    c = compare([1, 2, 3, 4], [1.5, 2.5, 3.5, 4.5])
    assert c["ci_overlap"] is True and c["significant"] is False
    assert c["words"].startswith("not significant")


def test_compare_says_when_three_repeats_cannot_establish_a_difference() -> None:
    # The CIs are far apart but with 3 and 3 repeats the smallest p is 0.1: not established.
    c = compare([1.0, 1.1, 1.2], [5.0, 5.1, 5.2])
    assert c["ci_overlap"] is False and c["mann_whitney_p"] == pytest.approx(0.1, abs=1e-6)
    assert c["significant"] is None and "not established" in c["words"]


def test_runtime_figures_on_recorded_rows() -> None:
    f = runtime_figures(per_repeat(rows()), "fast", "eager", POOL_CORES)
    assert f["freed_core_s"]["mean"] == pytest.approx(2.1)
    half = T_975_DF2 * 0.1 / math.sqrt(3)
    assert f["freed_ci_half_width_fraction"] == pytest.approx(half / 2.1, abs=1e-4)
    # gen slowdown = mean alone / mean together - 1 = 123.2 / 112 - 1 = 0.1 (a fraction)
    assert f["gen_slowdown"]["mean"] == pytest.approx(0.1)
    # score slowdown = 60 / 50 - 1 = 0.2, constant samples: exact
    assert (f["score_slowdown"]["mean"], f["score_slowdown"]["ci_low"]) == pytest.approx((0.2, 0.2))
    # unpaired step time change = mean(10, 10.5, 12.5) / mean(10, 11, 12) - 1 = 11 / 11 - 1 = 0;
    # paired = (10/10 x 10.5/11 x 12.5/12) ** (1/3) - 1 = 0.994318 ** (1/3) - 1 = -0.001898
    assert f["step_time_change_unpaired"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert f["step_time_change"]["mean"] == pytest.approx(-0.001898, abs=1e-6)
    assert f["step_time_change"]["method"].startswith("paired")
    assert f["step_time_change_unpaired"]["method"].startswith("Fieller")
    assert f["freed_core_s"]["method"].startswith("paired")
    assert f["timeboxed_rollouts_per_hour"]["mean"] == pytest.approx(1500.0)
    assert f["extra_rollouts_per_hour"]["mean"] == pytest.approx(400.0)
    assert set(f["significance"]) >= {"step_time_s", "scoring_core_s", "gen_slowdown", "timeboxed_rollouts_per_hour"}
    # scoring core-s 1.0-1.2 vs 3.0-3.4: CIs apart, but 3 vs 3 repeats cannot reach p < 0.05 unpaired ...
    assert f["significance_unpaired"]["scoring_core_s"]["significant"] is None
    # ... while paired, the log-ratios log(1/3), log(1.1/3.2), log(1.2/3.4) (mean -1.0693, sd 0.02861)
    # give t = 1.0693 / (0.02861 / sqrt 3) = 64.7 on 2 df: p = 0.00024
    paired_test = f["significance"]["scoring_core_s"]
    assert paired_test["significant"] is True and paired_test["paired_t_p"] == pytest.approx(0.000238, abs=2e-6)
    assert paired_test["smallest_sign_flip_p"] == pytest.approx(0.25)  # 2 / 2**3


def test_the_baseline_compares_to_itself_exactly() -> None:
    f = runtime_figures(per_repeat(rows()), "eager", "eager", POOL_CORES)
    assert f["step_time_change"]["mean"] == 0.0 and f["step_time_change"]["ci_high"] == 0.0
    assert f["freed_core_s"]["mean"] == 0.0
    assert "step_time_s" not in f["significance"]  # nothing to compare with


def test_accounting_summary_counts_steps_within_tolerance() -> None:
    recorded = rows()
    recorded[0]["pool"].update(residual_fraction=0.08, within_5pct=False)
    s = accounting_summary(recorded)
    assert s["checked"] == len(recorded) and s["within_5pct"] == len(recorded) - 1
    assert s["max_abs_residual_fraction"] == pytest.approx(0.08)
    assert s["settle"] is None  # these rows were recorded without the idle wait
    first = recorded[0]["condition"]
    by = s["by_condition"][first]
    assert by["within_5pct"] == by["checked"] - 1 and by["max_abs_residual_fraction"] == pytest.approx(0.08)
    assert sum(c["checked"] for c in s["by_condition"].values()) == len(recorded)


def test_accounting_summary_reports_the_idle_waits() -> None:
    recorded = rows()
    for i, row in enumerate(recorded):
        row.update(settle_s=0.25 * (i + 1), settled=i > 0)
    s = accounting_summary(recorded)["settle"]
    n = len(recorded)
    assert s["conditions"] == n and s["not_settled"] == 1 and s["max_s"] == pytest.approx(0.25 * n)
    assert s["mean_s"] == pytest.approx(0.25 * (n + 1) / 2, abs=1e-3)


def _shared_slowdown_rows() -> list[dict]:
    """Five repeats in which a session factor (+-30 %) slows every figure of both runtimes alike;
    ``fast`` truly takes 0.9 x eager's step time and 0.5 x its scoring cost, with +-1 % noise of its own."""
    from tests.helpers.recorded import row

    session = [1.0, 1.3, 0.85, 1.15, 0.7]
    noise = [0.01, -0.01, 0.005, 0.0, -0.005]
    out = []
    for rep, (f, e) in enumerate(zip(session, noise, strict=True)):
        for rt, step, cost in (("eager", 10.0, 3.0), ("fast", 9.0 * (1 + e), 1.5 * (1 - e))):
            out.append(
                row(
                    rt,
                    "together",
                    rep,
                    {
                        "step_s": step * f,
                        "score_core_s": cost * f,
                        "gen_tokens_per_s": 100 / f,
                        "score_rollouts_per_s": 20 / f,
                    },
                )
            )
            out.append(row(rt, "gen_alone", rep, {"gen_tokens_per_s": 125 / f, "gen_core_s_per_rollout": 0.5 * f}))
            out.append(row(rt, "score_alone", rep, {"score_rollouts_per_s": 40 / f}))
            out.append(row(rt, "timeboxed", rep, {"rollouts_per_hour": 1000 / f}))
    return out


def test_a_shared_slowdown_cancels_in_the_paired_figures() -> None:
    f = runtime_figures(per_repeat(_shared_slowdown_rows()), "fast", "eager", POOL_CORES)
    paired, unpaired = f["step_time_change"], f["step_time_change_unpaired"]
    # The true change is 0.9 - 1 = -10 %: the paired interval covers it and is far narrower.
    assert paired["ci_low"] <= -0.10 <= paired["ci_high"]
    assert paired["ci_high"] - paired["ci_low"] < (unpaired["ci_high"] - unpaired["ci_low"]) / 10
    assert f["significance"]["step_time_s"]["significant"] is True
    assert f["significance_unpaired"]["step_time_s"]["significant"] is not True  # hidden by the session spread
    # Scoring cost: truly -50 %, paired again.
    cost = f["scoring_core_s_change"]
    assert cost["ci_low"] <= -0.5 <= cost["ci_high"] and cost["method"].startswith("paired")
    # Throughput together and time-boxed rollouts/hour move with the session only: no change, exactly.
    assert f["gen_tokens_per_s_together_change"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert f["timeboxed_rollouts_per_hour_change"]["ci_high"] == pytest.approx(0.0, abs=1e-9)
