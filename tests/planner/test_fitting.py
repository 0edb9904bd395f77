"""Fits recover known coefficients from exact data; residuals measure noise; bad grids are refused."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.planner.profile.fitting import fit_cost_per_token, fit_generation_model, fit_latency_model, nonneg_lstsq
from rlsim.planner.profile.schema import GenerationPoint, LatencySample


def _samples(a: float, b: float, c: float, alpha: float, units: list[int], noise: float = 0.0) -> list[LatencySample]:
    rng = np.random.default_rng(1)
    out = []
    for u in units:
        for batch in (1, 4, 16, 32):
            for length in (16, 64, 256):
                padded = batch * length
                lat = a + (b * batch + c * padded) * (2 / u) ** alpha
                out.append(
                    LatencySample(
                        batch=batch, padded_tokens=padded, units=u, latency_s=lat * float(np.exp(rng.normal(0, noise)))
                    )
                )
    return out


def test_latency_fit_recovers_exact_coefficients() -> None:
    model = fit_latency_model(_samples(0.004, 1e-4, 2e-5, 1.0, [2]), "cpu", 512)
    assert (model.intercept_s, model.per_sequence_s, model.per_padded_token_s) == (
        pytest.approx(0.004),
        pytest.approx(1e-4),
        pytest.approx(2e-5),
    )
    assert model.fit.r2 == pytest.approx(1.0)
    assert model.fit.residual_rel_std == pytest.approx(0.0, abs=1e-9)
    assert not model.unit_exponent_measured and model.units == 2


def test_latency_fit_measures_the_unit_exponent_from_two_thread_counts() -> None:
    model = fit_latency_model(_samples(0.004, 1e-4, 2e-5, 0.75, [1, 2, 2]), "cpu", 512)
    assert model.unit_exponent_measured
    assert model.unit_exponent == pytest.approx(0.75)
    assert model.latency_s(8, 800, 1) == pytest.approx(0.004 + (8e-4 + 0.016) * 2**0.75)


def test_a_call_slowed_by_other_work_is_left_out_of_the_latency_fit() -> None:
    samples = _samples(0.004, 1e-4, 2e-5, 1.0, [2])
    samples[5] = samples[5].model_copy(update={"latency_s": samples[5].latency_s * 3})
    model = fit_latency_model(samples, "cpu", 512)
    assert model.per_padded_token_s == pytest.approx(2e-5) and model.intercept_s == pytest.approx(0.004)
    assert model.fit.n_samples == len(samples) - 1 and len(model.samples) == len(samples)


def test_residuals_reflect_measurement_noise() -> None:
    model = fit_latency_model(_samples(0.004, 1e-4, 2e-5, 1.0, [2], noise=0.05), "cpu", 512)
    assert 0.02 < model.fit.residual_rel_std < 0.1


def test_latency_fit_needs_a_real_grid() -> None:
    one_batch = [LatencySample(batch=8, padded_tokens=8 * n, latency_s=0.01 * n, units=2) for n in (16, 32, 64)]
    with pytest.raises(RlsimError, match="two batch sizes"):
        fit_latency_model(one_batch, "cpu", 512)
    with pytest.raises(RlsimError, match="at least 3"):
        fit_latency_model(one_batch[:2], "cpu", 512)


def test_generation_fit_from_throughput_points() -> None:
    # step = 0.02 + 0.001 n on 2 units: tokens/s = n / step.
    points = [GenerationPoint(running=n, units=2, tokens_per_s=n / (0.02 + 0.001 * n)) for n in (4, 16, 64)]
    model = fit_generation_model(points, "cpu", max_running=128)
    assert (model.base_s, model.per_seq_s) == (pytest.approx(0.02), pytest.approx(0.001))
    with pytest.raises(RlsimError, match="one concurrency"):
        fit_generation_model(points[:1], "cpu", max_running=128)


def test_cost_per_token() -> None:
    assert fit_cost_per_token([100, 200, 400], [1.5, 2.0, 3.0]) == (pytest.approx(1.0), pytest.approx(0.005))
    assert fit_cost_per_token([100, 100], [2.0, 2.0]) == (0.0, pytest.approx(0.02))


def test_nonneg_lstsq_never_returns_negative_coefficients() -> None:
    design = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    coef = nonneg_lstsq(design, np.array([3.0, 2.0, 1.0]))  # unconstrained slope would be -1
    assert np.all(coef >= 0)
    assert coef.tolist() == pytest.approx([2.0, 0.0])


def test_nonneg_lstsq_reaches_the_exact_optimum_of_every_column_subset():
    # The brute force the planner used before scipy's nnls: the best non-negative solution of every column
    # subset. nnls must reach the same residual on badly scaled designs (a column of ones beside token counts).
    from itertools import combinations

    rng = np.random.default_rng(7)
    for _ in range(200):
        n, k = int(rng.integers(3, 9)), int(rng.integers(1, 4))
        design = np.abs(rng.normal(size=(n, k))) * 10.0 ** rng.integers(-1, 5, size=k)
        target = rng.normal(size=n) * 100
        best = float(np.sum(target**2))
        for size in range(1, k + 1):
            for cols in combinations(range(k), size):
                coef, *_ = np.linalg.lstsq(design[:, cols], target, rcond=None)
                if np.all(coef >= 0):
                    best = min(best, float(np.sum((design[:, cols] @ coef - target) ** 2)))
        x = nonneg_lstsq(design, target)
        assert np.all(x >= 0)
        assert float(np.sum((design @ x - target) ** 2)) <= best * (1 + 1e-9) + 1e-9
