"""Small-sample statistics for benchmark repeats: means with CIs, spread, ratios and a rank test.

Benchmarks here produce a handful of independent repeats per condition (one value per fresh
process), so every interval is built for small ``n``:

- ``mean_ci``: Student-t interval on the mean (the default everywhere in rlsim);
- ``bootstrap_mean_ci``: BCa bootstrap (``scipy.stats.bootstrap``), seeded (too narrow below ~10 samples; offered for
  larger samples and for cross-checking);
- ``ratio_ci``: ratio of two independent means by Fieller's theorem (default; it is the exact
  t-based interval for a ratio and becomes unbounded when the denominator is not clearly non-zero)
  or by a seeded BCa bootstrap;
- ``mann_whitney_p``: two-sided Mann-Whitney U p-value (scipy), a test that assumes no normality.

Paired designs (two conditions measured in the same repeat, e.g. two runtimes in one Ray session)
cancel whatever the repeat shares (a slow session slows both), so they are analysed per pair:

- ``paired_log_ratio_ci``: geometric-mean ratio ``a/b`` with a t-interval on the per-pair log-ratios;
- ``paired_t_p``: two-sided one-sample t test on per-pair differences (or log-ratios); it can reach
  p < 0.05 with 3 pairs when their spread is small, where a rank test cannot;
- ``sign_flip_p``: exact sign-flip permutation test on the same differences (no normality assumed;
  its smallest p is ``2 / 2**n``, 0.0625 with 5 pairs, the same floor as Wilcoxon's signed-rank);
- ``repeats_for_half_width``: how many repeats a t-interval needs to shrink to a given half-width.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval; ``method`` names how the CI was built."""

    mean: float
    ci_low: float
    ci_high: float
    n: int
    method: str

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2.0

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


@dataclass(frozen=True)
class RatioEstimate:
    """``mean(a) / mean(b)`` with a CI; bounds are +/-inf when Fieller's interval is unbounded."""

    ratio: float
    ci_low: float
    ci_high: float
    method: str


def _as_array(samples: Sequence[float], need: int, what: str) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64).reshape(-1)
    if x.size < need:
        raise ValueError(f"{what} needs at least {need} samples, got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} got a non-finite sample: {x.tolist()}")
    return x


def _t_quantile(df: float, confidence: float) -> float:
    return float(stats.t.ppf(0.5 + confidence / 2.0, df))


def mean_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """Mean with a Student-t interval: ``mean +/- t(n-1) * s / sqrt(n)`` (s with ddof=1)."""
    x = _as_array(samples, 2, "mean_ci")
    mean = float(x.mean())
    half = _t_quantile(x.size - 1, confidence) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Estimate(mean, mean - half, mean + half, int(x.size), f"t-interval {confidence:.0%}")


def bootstrap_mean_ci(
    samples: Sequence[float], confidence: float = CONFIDENCE, n_boot: int = 10_000, seed: int = 0
) -> Estimate:
    """Mean with a BCa bootstrap interval (``scipy.stats.bootstrap``, ``n_boot`` resamples, seeded: same input,
    same CI). BCa corrects the plain percentile interval for bias and skew; a constant sample's is its value."""
    x = _as_array(samples, 2, "bootstrap_mean_ci")
    mean = float(x.mean())
    if np.ptp(x) == 0:  # no spread: every resample has the same mean (BCa's acceleration is 0/0)
        return Estimate(mean, mean, mean, int(x.size), f"bootstrap BCa {confidence:.0%}")
    low, high = _bca((x,), lambda s, axis: np.mean(s, axis=axis), confidence, n_boot, seed)
    return Estimate(mean, low, high, int(x.size), f"bootstrap BCa {confidence:.0%}")


def _bca(
    data: tuple[np.ndarray, ...], statistic: Callable[..., Any], confidence: float, n_boot: int, seed: int
) -> tuple[float, float]:
    """A BCa interval of ``statistic`` over independent samples; each sample is resampled on its own."""
    with warnings.catch_warnings():  # a degenerate resample distribution warns and gives NaN: reported as such
        warnings.simplefilter("ignore")
        result = stats.bootstrap(
            data,
            statistic,
            confidence_level=confidence,
            n_resamples=n_boot,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def coefficient_of_variation(samples: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1) over the mean; 0.03 means a 3% spread."""
    x = _as_array(samples, 2, "coefficient_of_variation")
    mean = float(x.mean())
    return float(x.std(ddof=1)) / mean if mean != 0 else math.inf


def percentiles(samples: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` with numpy's linear interpolation."""
    x = _as_array(samples, 1, "percentiles")
    return {f"p{q:g}": float(np.percentile(x, q)) for q in qs}


def ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = CONFIDENCE,
    method: Literal["fieller", "bootstrap"] = "fieller",
    n_boot: int = 10_000,
    seed: int = 0,
) -> RatioEstimate:
    """CI for ``mean(a) / mean(b)``, ``a`` and ``b`` independent samples (e.g. cell vs baseline)."""
    xa = _as_array(a, 2, "ratio_ci (numerator)")
    xb = _as_array(b, 2, "ratio_ci (denominator)")
    if xb.mean() == 0:
        raise ValueError("ratio_ci: the denominator's mean is 0")
    if method == "fieller":
        return _fieller(xa, xb, confidence)
    if method == "bootstrap":
        return _bootstrap_ratio(xa, xb, confidence, n_boot, seed)
    raise ValueError(f"unknown ratio CI method {method!r}; use 'fieller' or 'bootstrap'")


def _fieller(xa: np.ndarray, xb: np.ndarray, confidence: float) -> RatioEstimate:
    """Fieller's interval: every theta with ``|ma - theta*mb| <= t * sqrt(va + theta^2 vb)``.

    ``va``, ``vb`` are the squared standard errors; the degrees of freedom are Welch-Satterthwaite's
    for ``a - theta*b`` at the point estimate, since the two samples may differ in size and spread.
    """
    ma, mb = float(xa.mean()), float(xb.mean())
    va, vb = float(xa.var(ddof=1)) / xa.size, float(xb.var(ddof=1)) / xb.size
    theta = ma / mb
    spread = va + theta**2 * vb
    if spread == 0:  # both samples constant: the ratio is known exactly
        return RatioEstimate(theta, theta, theta, "fieller")
    df = spread**2 / (va**2 / (xa.size - 1) + theta**4 * vb**2 / (xb.size - 1))
    t2 = _t_quantile(df, confidence) ** 2
    quad = mb**2 - t2 * vb  # leading coefficient; <= 0 means the denominator may be 0
    if quad <= 0:
        return RatioEstimate(theta, -math.inf, math.inf, "fieller")
    root = math.sqrt(t2 * (va * mb**2 + vb * ma**2 - t2 * va * vb))
    low, high = sorted(((ma * mb - root) / quad, (ma * mb + root) / quad))
    return RatioEstimate(theta, low, high, "fieller")


def _bootstrap_ratio(xa: np.ndarray, xb: np.ndarray, confidence: float, n_boot: int, seed: int) -> RatioEstimate:
    theta = float(xa.mean() / xb.mean())
    if np.ptp(xa) == 0 and np.ptp(xb) == 0:
        return RatioEstimate(theta, theta, theta, "bootstrap")

    def ratio(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.mean(a, axis=axis) / np.mean(b, axis=axis)

    low, high = _bca((xa, xb), ratio, confidence, n_boot, seed)
    return RatioEstimate(theta, low, high, "bootstrap")


def ci_overlap(low_a: float, high_a: float, low_b: float, high_b: float) -> bool:
    """True when two intervals share at least one point (touching counts as overlapping)."""
    return low_a <= high_b and low_b <= high_a


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value (exact for small samples without ties, per scipy)."""
    xa = _as_array(a, 1, "mann_whitney_p")
    xb = _as_array(b, 1, "mann_whitney_p")
    return float(stats.mannwhitneyu(xa, xb, alternative="two-sided").pvalue)


def _pairs(a: Sequence[float], b: Sequence[float], what: str) -> tuple[np.ndarray, np.ndarray]:
    xa, xb = _as_array(a, 2, what), _as_array(b, 2, what)
    if xa.size != xb.size:
        raise ValueError(f"{what} needs pairs: got {xa.size} and {xb.size} values")
    return xa, xb


def log_ratios(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """``log(a_i / b_i)`` per pair; every value must be positive (a rate, a duration, a cost)."""
    xa, xb = _pairs(a, b, "log_ratios")
    if np.any(xa <= 0) or np.any(xb <= 0):
        raise ValueError("log_ratios needs positive values; compare differences instead")
    return np.log(xa / xb)


def paired_log_ratio_ci(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> RatioEstimate:
    """Ratio ``a/b`` of paired samples: ``exp(mean(log(a_i/b_i)))`` (the geometric mean of the
    per-pair ratios) with ``exp`` of the Student-t interval of the log-ratios (df = pairs - 1)."""
    e = mean_ci(log_ratios(a, b).tolist(), confidence)
    return RatioEstimate(math.exp(e.mean), math.exp(e.ci_low), math.exp(e.ci_high), "paired t on log-ratios")


def paired_t_p(diffs: Sequence[float]) -> float:
    """Two-sided p of a one-sample t test that the mean of ``diffs`` (per-pair differences or
    log-ratios) is 0. Zero spread: p = 1 when every difference is 0, else 0 (the difference is exact)."""
    x = _as_array(diffs, 2, "paired_t_p")
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    t = abs(mean) / (sd / math.sqrt(x.size))
    return float(2.0 * stats.t.sf(t, x.size - 1))


def sign_flip_p(diffs: Sequence[float], exact_up_to: int = 16, n_random: int = 100_000, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p-value for ``mean(diffs) == 0``: the share of the ``2**n``
    sign patterns whose ``|mean|`` reaches the observed one (exact up to ``exact_up_to`` pairs, then
    ``n_random`` seeded random patterns). The observed pattern counts, so p >= ``2 / 2**n``."""
    x = _as_array(diffs, 1, "sign_flip_p")
    observed = abs(float(x.mean()))
    if x.size <= exact_up_to:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=x.size)))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(n_random, x.size))
    means = np.abs(signs @ x) / x.size
    # A relative tolerance: patterns equal to the observed one up to rounding must count as reaching it.
    return float(np.mean(means >= observed * (1 - 1e-12) - 1e-15))


def sign_flip_floor(n: int) -> float:
    """The smallest two-sided p an exact sign-flip test on ``n`` pairs can give."""
    return min(1.0, 2.0 / 2**n)


def repeats_for_half_width(sd: float, half_width: float, confidence: float = CONFIDENCE, most: int = 100_000) -> int:
    """Fewest repeats ``n`` (>= 2) whose Student-t interval ``t(n-1) * sd / sqrt(n)`` is at most
    ``half_width``: the fixed point of ``n = (t(n-1) * sd / half_width)^2``. ``most`` caps the answer
    (a target far out of reach)."""
    if half_width <= 0:
        raise ValueError(f"repeats_for_half_width: the target half-width must be > 0, got {half_width}")
    if sd <= 0:
        return 2
    z = _t_quantile(math.inf, confidence)
    # t(n-1) > z, so the normal-quantile answer is a lower bound; step up from it.
    n = max(2, math.ceil((z * sd / half_width) ** 2))
    while n < most and _t_quantile(n - 1, confidence) * sd / math.sqrt(n) > half_width:
        n += 1
    return n
