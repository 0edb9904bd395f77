"""Statistics used by the benchmarks, checked against answers worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlsim.metrics.stats import (
    bootstrap_mean_ci,
    ci_overlap,
    coefficient_of_variation,
    mann_whitney_p,
    mean_ci,
    percentiles,
    ratio_ci,
)


def test_mean_ci_t_interval_known_answer() -> None:
    # [1..5]: mean 3, s = sqrt(10/4) = 1.58114, se = s/sqrt(5) = 0.70711,
    # t(0.975, df=4) = 2.776445 -> half-width 1.963243 -> [1.036757, 4.963243].
    est = mean_ci([1, 2, 3, 4, 5])
    assert est.mean == pytest.approx(3.0)
    assert est.ci_low == pytest.approx(1.036757, abs=1e-6)
    assert est.ci_high == pytest.approx(4.963243, abs=1e-6)
    assert est.half_width == pytest.approx(1.963243, abs=1e-6)
    assert est.n == 5 and "t-interval" in est.method


def test_mean_ci_needs_two_samples() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        mean_ci([1.0])


def test_coefficient_of_variation_known_answer() -> None:
    # s = 1.581139 (as above), mean 3 -> CV = 0.527046.
    assert coefficient_of_variation([1, 2, 3, 4, 5]) == pytest.approx(0.527046, abs=1e-6)


def test_percentiles_linear_interpolation() -> None:
    # 0..100 has p50 = 50, p95 = 95, p99 = 99 exactly; [1, 2] has p50 = 1.5 (halfway).
    assert percentiles(range(101)) == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    assert percentiles([1, 2], qs=(50,)) == {"p50": 1.5}


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    data = [10.0, 11.0, 9.5, 10.5, 10.2, 9.8]
    a = bootstrap_mean_ci(data, seed=7)
    b = bootstrap_mean_ci(data, seed=7)
    assert a == b
    assert a.ci_low < a.mean < a.ci_high
    # Resampled means can never leave [min, max] of the data.
    assert 9.5 <= a.ci_low and a.ci_high <= 11.0
    # A constant sample has a zero-width interval.
    c = bootstrap_mean_ci([4.0, 4.0, 4.0])
    assert (c.ci_low, c.ci_high) == (4.0, 4.0)


def test_fieller_ratio_known_answer() -> None:
    # a = [9,10,11], b = [4,5,6]: means 10 and 5, squared standard errors va = vb = 1/3, ratio 2.
    # Welch df at theta=2: (1/3 + 4/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = (25/9)/(17/18) = 50/17 = 2.9412,
    # t(0.975, 2.9412) = 3.218759, t^2 = 10.36040.
    # Quadratic: theta^2 (25 - t^2/3) - 100 theta + (100 - t^2/3) = 0, with leading coef 21.54653 and
    # sqrt-discriminant/2 = sqrt(t^2 (25/3 + 100/3 - t^2/9)) = 20.48800 -> (50 -/+ 20.488) / 21.54653.
    r = ratio_ci([9, 10, 11], [4, 5, 6])
    assert r.ratio == pytest.approx(2.0)
    assert r.ci_low == pytest.approx(1.36968, abs=1e-4)
    assert r.ci_high == pytest.approx(3.27144, abs=1e-4)
    assert r.method == "fieller"
    # The bounds solve Fieller's equation |ma - theta*mb| = t * sqrt(va + theta^2 vb).
    t = 3.218759
    for theta in (r.ci_low, r.ci_high):
        assert abs(10 - theta * 5) == pytest.approx(t * math.sqrt(1 / 3 + theta**2 / 3), rel=1e-5)


def test_fieller_is_unbounded_when_denominator_may_be_zero() -> None:
    # Denominator mean 0.1 with a spread of +/-1: zero is well inside its CI, so the ratio is unbounded.
    r = ratio_ci([5, 6, 7], [-0.9, 0.1, 1.1])
    assert r.ci_low == -math.inf and r.ci_high == math.inf


def test_fieller_constant_samples_give_exact_ratio() -> None:
    r = ratio_ci([6, 6, 6], [3, 3])
    assert (r.ratio, r.ci_low, r.ci_high) == (2.0, 2.0, 2.0)


def test_bootstrap_ratio_seeded_and_within_extremes() -> None:
    a, b = [9, 10, 11], [4, 5, 6]
    r1 = ratio_ci(a, b, method="bootstrap", seed=3)
    r2 = ratio_ci(a, b, method="bootstrap", seed=3)
    assert r1 == r2 and r1.method == "bootstrap"
    # Resampled ratios lie between min(a)/max(b) = 1.5 and max(a)/min(b) = 2.75.
    assert 1.5 <= r1.ci_low < 2.0 < r1.ci_high <= 2.75


def test_ratio_rejects_unknown_method() -> None:
    with pytest.raises(ValueError, match="fieller"):
        ratio_ci([1, 2], [1, 2], method="magic")  # type: ignore[arg-type]


def test_ci_overlap() -> None:
    assert ci_overlap(1, 2, 2, 3)  # touching counts
    assert ci_overlap(1, 5, 2, 3)  # nested
    assert not ci_overlap(1, 2, 2.1, 3)
    assert not ci_overlap(2.1, 3, 1, 2)


def test_mann_whitney_exact_p() -> None:
    # Complete separation of 3 vs 3: only 2 of C(6,3) = 20 rank splits are this extreme (either
    # direction), so the exact two-sided p is 2/20 = 0.1.
    assert mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    # 5 vs 5 separated: 2 / C(10,5) = 2/252.
    assert mann_whitney_p(np.arange(5), np.arange(5) + 10) == pytest.approx(2 / 252)


def test_non_finite_samples_rejected() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        mean_ci([1.0, float("nan")])
