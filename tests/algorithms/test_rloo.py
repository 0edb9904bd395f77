"""The RLOO leave-one-out baseline on hand-worked groups."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.algorithms.rloo import rloo_advantages, rloo_baseline


def test_baseline_is_the_mean_of_the_other_samples() -> None:
    # Group 0: rewards 1, 2, 6 -> baselines (2+6)/2 = 4, (1+6)/2 = 3.5, (1+2)/2 = 1.5.
    # Group 7 (interleaved): 10, 20 -> baselines 20, 10.
    groups = [0, 7, 0, 7, 0]
    rewards = [1.0, 10.0, 2.0, 20.0, 6.0]
    np.testing.assert_allclose(rloo_baseline(groups, rewards), [4.0, 20.0, 3.5, 10.0, 1.5])
    np.testing.assert_allclose(rloo_advantages(groups, rewards), [-3.0, -10.0, -1.5, 10.0, 4.5])


def test_rloo_is_the_centred_reward_scaled_by_n_over_n_minus_1() -> None:
    rng = np.random.default_rng(3)
    r = rng.normal(size=5)
    np.testing.assert_allclose(rloo_advantages([0] * 5, r), (r - r.mean()) * 5 / 4, rtol=1e-5)


def test_a_group_of_one_is_refused() -> None:
    with pytest.raises(ValueError, match="group_size"):
        rloo_advantages([0, 0, 1], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="non-finite"):
        rloo_advantages([0, 0], [1.0, float("inf")])
