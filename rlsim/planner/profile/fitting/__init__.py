"""Least-squares fits that turn measurements into profile models (numpy only).

Latencies and step times span orders of magnitude, so the fits minimise *relative* residuals
(each row weighted by 1 / measured value) and keep every coefficient >= 0 (an exact non-negative
least squares over the few columns: every subset is tried and the best feasible one kept). Where
samples were taken at more than one unit count, the unit-scaling exponent is found by a grid search
around that linear fit; with one unit count it is assumed 1.0 (perfect scaling) and marked so.
Scorer latencies are fitted twice: the second time without calls ``SLOW_OUTLIER`` slower than the
first fit (the samples stay in the profile; ``fit.n_samples`` counts those used).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
from scipy.optimize import nnls

from rlsim.errors import RlsimError
from rlsim.planner.profile.schema import (
    Device,
    FitStats,
    GenerationModel,
    GenerationPoint,
    LatencySample,
    ScorerLatencyModel,
    UpdateCostModel,
    UpdateSample,
)

EXPONENT_GRID = np.round(np.linspace(0.0, 1.5, 61), 4)
# A measurement this much slower than a first fit is left out of the second: on a shared machine other
# programs only ever slow a call or step down, so such points say more about them than about the model.
SLOW_OUTLIER = 0.3


def nonneg_lstsq(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Coefficients >= 0 minimising ``|design @ x - target|``; shapes (n, k), (n,) -> (k,).

    ``scipy.optimize.nnls`` (Lawson-Hanson active set) on columns scaled to unit norm, so a column of token
    counts (~1e5) and a column of ones are treated alike; a zero column keeps a zero coefficient.
    """
    design = np.asarray(design, dtype=float)
    target = np.asarray(target, dtype=float)
    norms = np.linalg.norm(design, axis=0)
    scale = np.where(norms > 0, norms, 1.0)
    coef, _residual = nnls(design / scale, target)
    return np.where(norms > 0, coef / scale, 0.0)


def fit_stats(measured: np.ndarray, predicted: np.ndarray) -> FitStats:
    """R^2 on the measured scale and relative residuals ``measured / predicted - 1``."""
    measured = np.asarray(measured, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    ss_res = float(np.sum((measured - predicted) ** 2))
    ss_tot = float(np.sum((measured - measured.mean()) ** 2))
    rel = measured / np.maximum(predicted, 1e-12) - 1.0
    return FitStats(
        n_samples=int(measured.size),
        r2=1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0,
        residual_rel_std=float(np.std(rel)) if rel.size > 1 else 0.0,
        residual_rel_max=float(np.max(np.abs(rel))) if rel.size else 0.0,
    )


def _reference_units(units: np.ndarray) -> float:
    """The unit count most samples used (the largest on ties): the model's reference."""
    counts = Counter(units.tolist())
    return float(max(counts, key=lambda u: (counts[u], u)))


S = TypeVar("S", bound=LatencySample)


def fit_scaled(
    fixed: np.ndarray,
    scaled: np.ndarray,
    target: np.ndarray,
    units: np.ndarray,
    ref: float,
    search: bool | None = None,
) -> tuple[np.ndarray, float, bool]:
    """Fit ``target = fixed @ p + (scaled @ q) * (ref/units)**alpha`` with relative weights (p, q >= 0): the one
    scaled fit behind the scorer, generation, trainer and loop fits.

    ``fixed`` (n, kf) columns do not scale with units, ``scaled`` (n, ks) do. ``search``: whether to search alpha
    over ``EXPONENT_GRID`` (default: when ``units`` holds more than one count; else alpha is 1). Returns the
    coefficients (kf + ks,), alpha, and whether alpha was searched.
    """
    weights = 1.0 / target
    measured = len(np.unique(units)) > 1 if search is None else search
    grid = EXPONENT_GRID if measured else np.array([1.0])
    best: tuple[float, np.ndarray, float] | None = None
    for alpha in grid:
        factor = (ref / units) ** alpha
        design = np.hstack([fixed, scaled * factor[:, None]]) * weights[:, None]
        coef = nonneg_lstsq(design, target * weights)
        err = float(np.sum((design @ coef - target * weights) ** 2))
        if best is None or err < best[0] - 1e-15:
            best = (err, coef, float(alpha))
    assert best is not None
    return best[1], best[2], measured


def fit_latency_model(
    samples: Sequence[LatencySample], device: Device, max_length: int, disturbed_above: float | None = None
) -> ScorerLatencyModel:
    """Fit ``latency_s = a + (b x batch + c x padded_tokens) x (units_ref / units) ** alpha``.

    Needs at least 3 samples spanning two batch sizes and two padded lengths, else an RlsimError
    saying which grid to measure. ``disturbed_above``: leave out calls during which other programs
    took more than this share of the cores (when enough calls remain to fit); all are kept in the model.
    """
    every = list(samples)
    samples = calm_samples(every, disturbed_above)
    if len(samples) < 3:
        raise RlsimError(
            f"need at least 3 latency samples to fit a scorer model, got {len(samples)}; "
            "measure a grid of batch sizes and lengths"
        )
    batch = np.array([s.batch for s in samples], dtype=float)
    padded = np.array([s.padded_tokens for s in samples], dtype=float)
    latency = np.array([s.latency_s for s in samples], dtype=float)
    units = np.array([s.units for s in samples], dtype=float)
    if len(np.unique(batch)) < 2 or len(np.unique(padded / batch)) < 2:
        raise RlsimError(
            "latency samples must cover at least two batch sizes and two sequence lengths; "
            "widen the batch_sizes and lengths grid"
        )
    ref = _reference_units(units)
    keep = np.ones(len(samples), dtype=bool)
    for _ in range(2):  # fit, then refit without the calls far slower than the fit (other work ran)
        coef, alpha, measured = fit_scaled(
            np.ones((keep.sum(), 1)), np.column_stack([batch, padded])[keep], latency[keep], units[keep], ref
        )
        predicted = coef[0] + (coef[1] * batch + coef[2] * padded) * (ref / units) ** alpha
        slow = latency / np.maximum(predicted, 1e-12) - 1.0 > SLOW_OUTLIER
        if not slow.any() or (~slow).sum() < 4:
            break
        keep = ~slow
    model = ScorerLatencyModel(
        device=device,
        units=ref,
        intercept_s=float(coef[0]),
        per_sequence_s=float(coef[1]),
        per_padded_token_s=float(coef[2]),
        unit_exponent=alpha,
        unit_exponent_measured=measured,
        max_length=max_length,
        fit=FitStats(n_samples=0, r2=0.0, residual_rel_std=0.0, residual_rel_max=0.0),
        samples=every,
    )
    predicted = np.array([model.latency_s(b, p, u) for b, p, u in zip(batch, padded, units, strict=True)])
    return model.model_copy(update={"fit": fit_stats(latency[keep], predicted[keep])})


def calm_samples(samples: Sequence[S], disturbed_above: float | None) -> list[S]:
    """``samples`` without the calls during which other programs took more than ``disturbed_above`` of the
    cores, when enough remain to fit (a third, at least 3); all of them otherwise."""
    every = list(samples)
    calm = [x for x in every if disturbed_above is None or (x.foreign_share or 0.0) <= disturbed_above]
    return calm if len(calm) >= max(3, len(every) // 3) else every


def fit_update_model(
    samples: Sequence[UpdateSample],
    device: Device,
    optimizer_s: Callable[[float], float],
    disturbed_above: float | None = None,
) -> UpdateCostModel:
    """Fit ``latency_s - o(units) = a + (r x response_tokens + c x padded_tokens) x (units_ref / units) ** alpha``
    (``UpdateCostModel``): each timed update held one optimizer step, ``optimizer_s(units)`` seconds, which
    the model leaves out (the planner adds the steps a run makes). Disturbed calls are left out as
    ``fit_latency_model`` does. Needs two batch sizes and two response lengths (one batch size leaves
    ``padded - response = batch x prompt`` constant, the intercept's direction), else an RlsimError."""
    every = list(samples)
    rows = calm_samples(every, disturbed_above)
    response = np.array([s.response_tokens for s in rows], dtype=float)
    padded = np.array([s.padded_tokens for s in rows], dtype=float)
    design = np.column_stack([np.ones(len(rows)), response, padded])
    if len(rows) < 3 or np.linalg.matrix_rank(design) < 3:
        raise RlsimError(
            f"{len(rows)} update samples cannot separate the per-call, per-response-token and per-padded-token "
            "costs; time two batch sizes and two response lengths"
        )
    units = np.array([s.units for s in rows], dtype=float)
    steps = np.array([optimizer_s(u) for u in units], dtype=float)
    latency = np.maximum(np.array([s.latency_s for s in rows], dtype=float) - steps, 1e-6)
    ref = _reference_units(units)
    coef, alpha, measured = fit_scaled(
        np.ones((len(rows), 1)), np.column_stack([response, padded]), latency, units, ref
    )
    model = UpdateCostModel(
        device=device,
        units=ref,
        intercept_s=float(coef[0]),
        per_response_token_s=float(coef[1]),
        per_padded_token_s=float(coef[2]),
        unit_exponent=alpha,
        unit_exponent_measured=measured,
        fit=FitStats(n_samples=0, r2=0.0, residual_rel_std=0.0, residual_rel_max=0.0),
        samples=every,
    )
    predicted = np.array([model.latency_s(r, p, u) for r, p, u in zip(response, padded, units, strict=True)])
    return model.model_copy(update={"fit": fit_stats(latency, predicted)})


def fit_generation_model(
    points: Sequence[GenerationPoint],
    device: Device,
    max_running: int,
    prefill_s_per_token: float = 0.0,
    host_cores_per_unit: float = 0.0,
) -> GenerationModel:
    """Fit ``step_s = (base + per_seq x running) x (units_ref / units) ** alpha`` from throughput points.

    Each point's iteration time is ``running / tokens_per_s``. Needs two or more running levels at
    some unit count (one level cannot separate the fixed and per-sequence costs).
    """
    if not points:
        raise RlsimError("no generation points to fit; give loop results or measured points")
    running = np.array([p.running for p in points], dtype=float)
    units = np.array([p.units for p in points], dtype=float)
    step = running / np.array([p.tokens_per_s for p in points], dtype=float)
    if len(np.unique(running)) < 2:
        raise RlsimError(
            f"generation was measured at one concurrency only ({running[0]:g} running sequences); the curve "
            "needs two or more (run the loop with different prompts_per_step or max_num_seqs)"
        )
    ref = _reference_units(units)
    coef, alpha, measured = fit_scaled(
        np.zeros((len(points), 0)), np.column_stack([np.ones_like(running), running]), step, units, ref
    )
    model = GenerationModel(
        device=device,
        units=ref,
        base_s=float(coef[0]),
        per_seq_s=float(coef[1]),
        prefill_s_per_token=prefill_s_per_token,
        unit_exponent=alpha,
        unit_exponent_measured=measured,
        max_running=max_running,
        host_cores_per_unit=host_cores_per_unit,
        fit=FitStats(n_samples=0, r2=0.0, residual_rel_std=0.0, residual_rel_max=0.0),
        points=list(points),
    )
    predicted = np.array([model.step_s(n, u) for n, u in zip(running, units, strict=True)])
    return model.model_copy(update={"fit": fit_stats(step, predicted)})


def fit_cost_per_token(tokens: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """``seconds = fixed + per_token x tokens`` (both >= 0); through the origin if tokens never vary.

    Returns ``(fixed_s, per_token_s)``.
    """
    x = np.asarray(tokens, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if x.size == 0 or np.any(x <= 0):
        raise RlsimError("cost fit needs one or more steps with a positive token count")
    if len(np.unique(x)) < 2:
        return 0.0, float(y.mean() / x.mean())
    coef = nonneg_lstsq(np.column_stack([np.ones_like(x), x]), y)
    return float(coef[0]), float(coef[1])
