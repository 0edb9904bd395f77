"""Group-normalised advantages against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.algorithms.advantages import group_advantages


def test_each_group_is_centred_and_scaled_on_its_own() -> None:
    # Group 0: rewards 1, 3 -> mean 2, population std 1 -> -1, +1. Group 1: 2, 2 -> all equal -> 0, 0.
    adv = group_advantages([0, 0, 1, 1], [1.0, 3.0, 2.0, 2.0])
    np.testing.assert_allclose(adv, [-1.0, 1.0, 0.0, 0.0], atol=1e-5)
    assert adv.dtype == np.float32


def test_group_members_need_not_be_adjacent() -> None:
    # Group 5: 0, 4, 8 (mean 4, std sqrt(32/3)); group 9: 10, 20 (mean 15, std 5).
    adv = group_advantages([5, 9, 5, 9, 5], [0.0, 10.0, 4.0, 20.0, 8.0])
    s = np.sqrt(32 / 3)
    np.testing.assert_allclose(adv, [-4 / s, -1.0, 0.0, 1.0, 4 / s], rtol=1e-5)


def test_without_std_normalisation_only_the_mean_is_removed() -> None:
    adv = group_advantages([0, 0, 0], [1.0, 2.0, 6.0], normalize_std=False)
    np.testing.assert_allclose(adv, [-2.0, -1.0, 3.0])


def test_bad_rewards_are_refused() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        group_advantages([0, 0], [1.0, float("nan")])
    with pytest.raises(ValueError, match="group ids"):
        group_advantages([0], [1.0, 2.0])


def test_the_group_std_convention_ddof_and_epsilon() -> None:
    # Rewards 0, 0, 0, 1 (n = 4): mean 0.25; population std sqrt(0.1875) = 0.4330, unbiased
    # sqrt(0.25) = 0.5 (a factor sqrt(4/3) = 1.155). The last sample: 0.75 / 0.4330 = 1.7321 vs 0.75 / 0.5 = 1.5.
    rewards = [0.0, 0.0, 0.0, 1.0]
    pop = group_advantages([0] * 4, rewards, eps=0.0)
    unbiased = group_advantages([0] * 4, rewards, eps=0.0, ddof=1)
    assert float(pop[3]) == pytest.approx(0.75 / np.sqrt(0.1875), rel=1e-6)
    assert float(unbiased[3]) == pytest.approx(1.5, rel=1e-6)
    assert float(pop[3] / unbiased[3]) == pytest.approx(np.sqrt(4 / 3), rel=1e-6)
    # TRL's epsilon 1e-4 with the unbiased std: 0.75 / 0.5001.
    assert float(group_advantages([0] * 4, rewards, eps=1e-4, ddof=1)[3]) == pytest.approx(0.75 / 0.5001, rel=1e-6)
    with pytest.raises(ValueError, match="ddof must be 0"):
        group_advantages([0] * 4, rewards, ddof=2)


def test_a_group_of_one_gets_zero_or_its_raw_reward() -> None:
    # Group 1 holds one sample with reward 2: rlsim gives 0 (nothing to compare with), whatever the ddof;
    # verl gives (2 - 0) / (1 + eps).
    groups, rewards = [0, 0, 1], [1.0, 3.0, 2.0]
    for ddof in (0, 1):
        assert float(group_advantages(groups, rewards, ddof=ddof)[2]) == 0.0
    assert float(group_advantages(groups, rewards, ddof=1, group_of_one="reward")[2]) == pytest.approx(2 / (1 + 1e-6))
    assert float(group_advantages(groups, rewards, normalize_std=False, group_of_one="reward")[2]) == 2.0
