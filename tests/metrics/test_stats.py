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
    paired_log_ratio_ci,
    paired_t_p,
    percentiles,
    ratio_ci,
    repeats_for_half_width,
    sign_flip_floor,
    sign_flip_p,
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


def test_paired_log_ratio_known_answer() -> None:
    # Per-pair ratios e^0.1, e^0.2, e^0.3: log-ratios mean 0.2, sd 0.1, half-width
    # t(0.975, 2) x 0.1 / sqrt(3) = 4.302653 x 0.057735 = 0.248414 -> exp(0.2 +/- 0.248414).
    b = [10.0, 20.0, 40.0]
    a = [x * math.exp(d) for x, d in zip(b, (0.1, 0.2, 0.3), strict=True)]
    r = paired_log_ratio_ci(a, b)
    assert r.ratio == pytest.approx(math.exp(0.2))
    assert (r.ci_low, r.ci_high) == pytest.approx((math.exp(0.2 - 0.248414), math.exp(0.2 + 0.248414)), rel=1e-5)
    assert r.method == "paired t on log-ratios"


def test_paired_log_ratio_refuses_what_has_no_log_or_no_pairs() -> None:
    with pytest.raises(ValueError, match="positive"):
        paired_log_ratio_ci([1.0, 0.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="pairs"):
        paired_log_ratio_ci([1.0, 2.0, 3.0], [1.0, 2.0])


def test_paired_t_p_known_answer() -> None:
    # diffs 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.464102 on 2 df. With 2 df the t tail is
    # closed-form: P(T > t) = (1 - t / sqrt(t^2 + 2)) / 2 = (1 - 3.464102 / 3.741657) / 2 = 0.037090.
    assert paired_t_p([1.0, 2.0, 3.0]) == pytest.approx(2 * 0.037090, abs=1e-6)
    assert paired_t_p([0.5, 0.5, 0.5]) == 0.0  # no spread, not 0: the difference is exact
    assert paired_t_p([0.0, 0.0]) == 1.0


def test_sign_flip_p_exact_counts() -> None:
    # Every difference positive: only the observed pattern and its mirror reach |mean| = 3 -> 2/32.
    assert sign_flip_p([1, 2, 3, 4, 5]) == pytest.approx(2 / 32)
    assert sign_flip_floor(5) == pytest.approx(0.0625)
    # [1, -1, 2]: sums over the 8 sign patterns are +-4, +-2, +-2, 0, 0; |sum| >= 2 in 6 of 8.
    assert sign_flip_p([1, -1, 2]) == pytest.approx(6 / 8)


def test_paired_t_can_be_significant_where_sign_flip_cannot() -> None:
    # 3 pairs with a steady difference: the paired t test finds it, the exact sign-flip test cannot
    # go below 2 / 2**3 = 0.25 -- the reason the verdict rests on the t test at small n.
    diffs = [1.0, 1.1, 0.9]
    assert paired_t_p(diffs) < 0.01
    assert sign_flip_p(diffs) == pytest.approx(0.25)


def test_paired_interval_is_narrower_than_unpaired_under_a_shared_slowdown() -> None:
    # Five repeats, each slowing both sides by a shared session factor (+-30 %); the runtime is
    # truly 0.8 x the baseline, with +-1 % noise of its own. Pairing cancels the session factor.
    session = [1.0, 1.3, 0.85, 1.15, 0.7]
    noise = [0.01, -0.01, 0.005, 0.0, -0.005]
    base = [10.0 * f for f in session]
    runtime = [8.0 * f * (1 + e) for f, e in zip(session, noise, strict=True)]
    paired = paired_log_ratio_ci(runtime, base)
    unpaired = ratio_ci(runtime, base)
    assert paired.ci_low <= 0.8 <= paired.ci_high
    assert paired.ci_high - paired.ci_low < (unpaired.ci_high - unpaired.ci_low) / 10
    assert paired_t_p(np.log(np.divide(runtime, base)).tolist()) < 1e-4
    assert mann_whitney_p(runtime, base) > 0.05  # unpaired, the shared spread hides the difference


def test_repeats_for_half_width_worked_example() -> None:
    # sd 0.2, target half-width 0.1: n = (t(n-1) x 0.2 / 0.1)^2. Start from z = 1.96: 15.4 -> 16;
    # t(15) = 2.1314 -> 18.2 -> 19; t(18) = 2.1009 -> 17.7 -> 18; t(17) = 2.1098 -> 17.8 -> 18, fixed.
    # Check: n = 18 gives 2.1098 x 0.2 / sqrt(18) = 0.09946 <= 0.1; n = 17 gives 2.1199 x 0.2 / sqrt(17)
    # = 0.10283 > 0.1.
    assert repeats_for_half_width(0.2, 0.1) == 18
    assert repeats_for_half_width(0.1, 0.21) == 4  # 3.1824 x 0.1 / 2 = 0.159; n = 3: 4.3027 x 0.1 / 1.732 = 0.248
    assert repeats_for_half_width(0.0, 0.1) == 2
    with pytest.raises(ValueError, match="half-width"):
        repeats_for_half_width(0.2, 0.0)


def test_bca_bootstrap_agrees_with_the_t_interval_on_a_normal_sample() -> None:
    # On 60 normal draws every sound 95% interval for the mean is about mean +- 1.96 sd / sqrt(n).
    data = np.random.default_rng(11).normal(10.0, 2.0, size=60).tolist()
    boot, t = bootstrap_mean_ci(data, seed=1), mean_ci(data)
    assert boot.method.startswith("bootstrap BCa")
    assert boot.ci_high - boot.ci_low == pytest.approx(t.ci_high - t.ci_low, rel=0.12)
    assert boot.ci_low == pytest.approx(t.ci_low, abs=0.15) and boot.ci_high == pytest.approx(t.ci_high, abs=0.15)
