"""Statistics over repeats: every figure as {mean, ci_low, ci_high, n, method}, and significance in words.

Uses ``rlsim.metrics.stats`` only. Every runtime-vs-baseline figure is measured in the same repeat
(one Ray session, interleaved), so it is analysed *paired*: differences (freed capacity, extra
tokens/s and rollouts/hour) by the t-interval of the per-repeat differences, changes (step time,
scoring cost, generation throughput, time-boxed rollouts/hour) by the geometric mean of per-repeat
ratios with a t-interval on their logs; significance by a paired t test with an exact sign-flip
test beside it. A slow session then slows both sides of a pair and cancels out. The unpaired figures
(Fieller ratio of means, CI overlap and Mann-Whitney U) stay beside them under ``*_unpaired`` and
``significance_unpaired``; every figure's ``method`` says which it is. A CI bound that does not exist
(Fieller's interval is unbounded when the denominator is not clearly non-zero) is written as ``null``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlsim.experiment.capacity import Samples, capacity_samples, measured_bars, paired, values
from rlsim.metrics.stats import (
    ci_overlap,
    log_ratios,
    mann_whitney_p,
    mean_ci,
    paired_log_ratio_ci,
    paired_t_p,
    ratio_ci,
    sign_flip_floor,
    sign_flip_p,
)

ALPHA = 0.05
PAIRED_DIFF = "paired: t-interval of per-repeat differences"
PAIRED_CHANGE = "paired: geometric mean of per-repeat ratios minus 1, t-interval on log-ratios"
# Figure -> "condition.figure" compared against the baseline, as a change (paired) and unpaired.
AGAINST_BASELINE = {
    "step_time": "together.step_s",
    "scoring_core_s": "together.score_core_s",
    "gen_tokens_per_s_together": "together.gen_tokens_per_s",
    "timeboxed_rollouts_per_hour": "timeboxed.rollouts_per_hour",
}


def _finite(x: float) -> float | None:
    return round(float(x), 6) if math.isfinite(x) else None


def estimate(samples: Sequence[float]) -> dict[str, Any]:
    """``{mean, ci_low, ci_high, n, method}``; the CI is null below two samples."""
    if not samples:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0, "method": "not measured"}
    if len(samples) < 2:
        return {"mean": _finite(samples[0]), "ci_low": None, "ci_high": None, "n": 1, "method": "single sample"}
    e = mean_ci(samples)
    return {
        "mean": _finite(e.mean),
        "ci_low": _finite(e.ci_low),
        "ci_high": _finite(e.ci_high),
        "n": e.n,
        "method": e.method,
    }


def ratio_minus_one(numer: Sequence[float], denom: Sequence[float]) -> dict[str, Any]:
    """``mean(numer) / mean(denom) - 1`` with Fieller's 95 % interval, as a fraction (0.25 = +25 %)."""
    if len(numer) < 2 or len(denom) < 2:
        return estimate([])
    try:
        r = ratio_ci(numer, denom)
    except ValueError as err:  # a denominator of mean 0: nothing to compare against
        return {**estimate([]), "method": f"undefined ({err})"}
    return {
        "mean": _finite(r.ratio - 1.0),
        "ci_low": _finite(r.ci_low - 1.0),
        "ci_high": _finite(r.ci_high - 1.0),
        "n": min(len(numer), len(denom)),
        "method": "Fieller ratio of means, minus 1",
    }


def paired_change(numer: Sequence[float], denom: Sequence[float]) -> dict[str, Any]:
    """``numer / denom - 1`` pair by pair (same repeat): the geometric mean of the per-repeat ratios
    minus 1 with the t-interval of their logs, as a fraction (0.25 = +25 %)."""
    if len(numer) < 2:
        return estimate([])
    try:
        r = paired_log_ratio_ci(numer, denom)
    except ValueError as err:  # a zero or negative value: no ratio to take
        return {**estimate([]), "method": f"undefined ({err})"}
    return {
        "mean": _finite(r.ratio - 1.0),
        "ci_low": _finite(r.ci_low - 1.0),
        "ci_high": _finite(r.ci_high - 1.0),
        "n": len(numer),
        "method": PAIRED_CHANGE,
    }


def paired_compare(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Is ``a`` different from ``b``, pair by pair? A paired t test on the per-repeat log-ratios (on
    differences where a value is not positive), the verdict; and an exact sign-flip test beside it,
    which assumes no normality but cannot go below ``2 / 2**pairs`` (0.0625 with 5 pairs)."""
    if len(a) < 2:
        return {
            "method": "paired",
            "pairs": len(a),
            "paired_t_p": None,
            "sign_flip_p": None,
            "significant": None,
            "words": "not tested (fewer than 2 paired repeats)",
        }
    try:
        diffs, on = log_ratios(a, b), "log-ratios"
    except ValueError:
        diffs, on = np.subtract(a, b), "differences"
    p, flip, floor = paired_t_p(diffs.tolist()), sign_flip_p(diffs.tolist()), sign_flip_floor(len(diffs))
    verdict = "significant" if p < ALPHA else "not significant"
    flip_words = f"sign-flip p = {flip:.2g}" + (f", its smallest with {len(diffs)} pairs" if flip <= floor else "")
    return {
        "method": f"paired t on per-repeat {on}; exact sign-flip test beside it",
        "pairs": len(diffs),
        "paired_t_p": round(p, 6),
        "sign_flip_p": round(flip, 6),
        "smallest_sign_flip_p": round(floor, 6),
        "significant": p < ALPHA,
        "words": f"{verdict}: paired t p = {p:.2g} ({flip_words})",
    }


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided exact Mann-Whitney p-value that samples of these sizes can give."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def compare(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Is ``a`` different from ``b``? CI overlap of the two means and a two-sided Mann-Whitney test.

    ``significant``: True when the CIs do not overlap *and* p < 0.05, False when they overlap and
    p >= 0.05, None when the two disagree (``words`` says which way).
    """
    if len(a) < 2 or len(b) < 2:
        return {
            "ci_overlap": None,
            "mann_whitney_p": None,
            "significant": None,
            "words": "not tested (fewer than 2 repeats)",
        }
    ea, eb = mean_ci(a), mean_ci(b)
    overlap = ci_overlap(ea.ci_low, ea.ci_high, eb.ci_low, eb.ci_high)
    p = mann_whitney_p(a, b)
    floor = smallest_p(len(a), len(b))
    return {
        "method": "unpaired: 95% CI overlap and Mann-Whitney U",
        "ci_overlap": overlap,
        "mann_whitney_p": round(p, 6),
        "significant": _verdict(overlap, p),
        "smallest_reachable_p": round(floor, 6),
        "words": _words(overlap, p),
    }


def _verdict(overlap: bool, p: float) -> bool | None:
    if not overlap and p < ALPHA:
        return True
    if overlap and p >= ALPHA:
        return False
    return None


def _words(overlap: bool, p: float) -> str:
    test = f"Mann-Whitney p = {p:.2g}"
    verdict = _verdict(overlap, p)
    if verdict is True:
        return f"significant: 95% CIs apart, {test}"
    if verdict is False:
        return f"not significant: 95% CIs overlap, {test}"
    if not overlap:
        return f"not established: 95% CIs apart, but {test}"
    return f"not established: {test}, but the 95% CIs overlap"


def runtime_figures(
    per: Mapping[str, Mapping[str, Samples]], runtime: str, baseline: str, pool_cores: int
) -> dict[str, Any]:
    """Every per-runtime figure of results.json (see the report's glossary for definitions)."""
    v = lambda rt, key: values(per, rt, key)  # noqa: E731
    gen_alone, gen_tog = v(runtime, "gen_alone.gen_tokens_per_s"), v(runtime, "together.gen_tokens_per_s")
    sc_alone, sc_tog = v(runtime, "score_alone.score_rollouts_per_s"), v(runtime, "together.score_rollouts_per_s")
    out: dict[str, Any] = {
        "step_time_s": estimate(v(runtime, "together.step_s")),
        "scoring_critical_s": estimate(v(runtime, "together.score_exposed_s")),
        "scoring_critical_share": estimate(v(runtime, "together.score_critical_share")),
        "scoring_core_s": estimate(v(runtime, "together.score_core_s")),
        "scoring_core_s_alone": estimate(v(runtime, "score_alone.score_core_s")),
        "scoring_busy_s": estimate(v(runtime, "together.score_busy_s")),
        "scoring_gpu_s": estimate(v(runtime, "together.score_gpu_s")),
        "gen_tokens_per_s_alone": estimate(gen_alone),
        "gen_tokens_per_s_together": estimate(gen_tog),
        # The planner reads these two as ratios of means (unchanged); the paired forms sit beside them.
        "gen_slowdown": ratio_minus_one(gen_alone, gen_tog),
        "gen_slowdown_paired": paired_change(
            *_within(per, runtime, "gen_alone.gen_tokens_per_s", "together.gen_tokens_per_s")
        ),
        "score_rollouts_per_s_alone": estimate(sc_alone),
        "score_rollouts_per_s_together": estimate(sc_tog),
        "score_slowdown": ratio_minus_one(sc_alone, sc_tog),
        "score_slowdown_paired": paired_change(
            *_within(per, runtime, "score_alone.score_rollouts_per_s", "together.score_rollouts_per_s")
        ),
        "gen_core_s_per_rollout": estimate(v(runtime, "gen_alone.gen_core_s_per_rollout")),
        "timeboxed_rollouts_per_hour": estimate(v(runtime, "timeboxed.rollouts_per_hour")),
        "pool_core_s_per_step": {bar: estimate(v(runtime, f"together.pool.{bar}")) for bar in measured_bars(per)},
    }
    capacity = capacity_samples(per, runtime, baseline, pool_cores)
    for key in (
        "freed_core_s",
        "freed_gpu_s",
        "freed_pool_share",
        "extra_gen_tokens_per_s",
        "extra_rollouts_per_step",
        "extra_rollouts_per_hour",
    ):
        out[key] = {**estimate(capacity.get(key, [])), "method": PAIRED_DIFF} if capacity.get(key) else estimate([])
    for name, key in AGAINST_BASELINE.items():
        if runtime == baseline:
            out[f"{name}_change"] = out[f"{name}_change_unpaired"] = _exact_zero(len(v(runtime, key)))
        else:
            out[f"{name}_change"] = paired_change(*paired(per, (runtime, key), (baseline, key)))
            out[f"{name}_change_unpaired"] = ratio_minus_one(v(runtime, key), v(baseline, key))
    freed = out["freed_core_s"]
    out["freed_ci_half_width_fraction"] = _half_width_fraction(freed)
    out["significance"], out["significance_unpaired"] = _significance(per, runtime, baseline)
    return out


def _within(per: Mapping[str, Mapping[str, Samples]], runtime: str, a: str, b: str) -> tuple[list[float], list[float]]:
    return paired(per, (runtime, a), (runtime, b))


def _exact_zero(n: int) -> dict[str, Any]:
    return {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n": n, "method": "baseline (compared with itself)"}


def _half_width_fraction(e: Mapping[str, Any]) -> float | None:
    if e["mean"] in (None, 0) or e["ci_low"] is None or e["ci_high"] is None:
        return None
    return round((e["ci_high"] - e["ci_low"]) / 2.0 / abs(e["mean"]), 4)


def _significance(
    per: Mapping[str, Mapping[str, Samples]], runtime: str, baseline: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(paired, unpaired) tests: the slowdowns (alone vs together, same runtime and repeat) and,
    for a runtime other than the baseline, each figure against the baseline's in the same repeat."""
    pairs = {
        "gen_slowdown": ((runtime, "gen_alone.gen_tokens_per_s"), (runtime, "together.gen_tokens_per_s")),
        "score_slowdown": ((runtime, "score_alone.score_rollouts_per_s"), (runtime, "together.score_rollouts_per_s")),
    }
    if runtime != baseline:
        names = {"step_time": "step_time_s", "scoring_core_s": "scoring_core_s"}
        for name, key in AGAINST_BASELINE.items():
            pairs[names.get(name, name)] = ((runtime, key), (baseline, key))
    tests, unpaired = {}, {}
    for name, (a, b) in pairs.items():
        tests[name] = paired_compare(*paired(per, a, b))
        unpaired[name] = compare(values(per, *a), values(per, *b))
    return tests, unpaired


def accounting_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How well the identity held over every measured step (overall and per condition), how much of
    the pool others used, and how long the idle waits before conditions took."""
    checked = [r for r in rows if r["pool"]["checked"]]
    residuals = [r["pool"]["residual_fraction"] for r in checked]
    other = [
        r["pool"]["core_s"].get("other", 0.0) / r["pool"]["pool_core_s"]
        for r in checked
        if r["pool"]["pool_core_s"] > 0
    ]
    waits = [r for r in rows if "settle_s" in r]
    settle = (
        {
            "conditions": len(waits),
            "mean_s": round(sum(r["settle_s"] for r in waits) / len(waits), 3),
            "max_s": max(r["settle_s"] for r in waits),
            "not_settled": sum(1 for r in waits if not r["settled"]),
        }
        if waits
        else None
    )
    by_condition = {}
    for cond in dict.fromkeys(r["condition"] for r in checked):
        mine = [r["pool"] for r in checked if r["condition"] == cond]
        by_condition[cond] = {
            "checked": len(mine),
            "within_5pct": sum(1 for p in mine if p["within_5pct"]),
            "max_abs_residual_fraction": round(max(abs(p["residual_fraction"]) for p in mine), 5),
            "mean_seconds": round(sum(p["seconds"] for p in mine) / len(mine), 3),
        }
    return {
        "settle": settle,
        "by_condition": by_condition,
        "steps": len(rows),
        "checked": len(checked),
        "within_5pct": sum(1 for r in checked if r["pool"]["within_5pct"]),
        "max_abs_residual_fraction": round(max((abs(x) for x in residuals), default=0.0), 5),
        "mean_residual_fraction": round(sum(residuals) / len(residuals), 5) if residuals else None,
        "other_processes_pool_share": round(sum(other) / len(other), 4) if other else None,
    }
