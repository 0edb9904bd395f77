"""Group-normalised advantages against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.loop.advantages import group_advantages


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
