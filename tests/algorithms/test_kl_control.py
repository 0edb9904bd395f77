"""The KL coefficient controller on hand-worked steps (verl's and OpenRLHF's AdaptiveKLController formula)."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.algorithms.kl_control import KlController, sequence_mean_kl


def test_the_adaptive_coefficient_moves_towards_the_target_by_at_most_20_percent_of_n_over_horizon() -> None:
    # coef 0.1, target 0.1, 32 sequences, horizon 10000. KL 0.2: error 1.0 clipped to 0.2 ->
    # x (1 + 0.2 x 32 / 10000) = 0.1 x 1.00064. KL 0.09: error -0.1 -> x (1 - 0.1 x 0.0032).
    c = KlController(0.1, target=0.1, horizon=10000)
    assert c.update(0.2, 32) == pytest.approx(0.1 * 1.00064)
    assert c.update(0.09, 32) == pytest.approx(0.1 * 1.00064 * (1 - 0.1 * 32 / 10000))
    fixed = KlController(0.1)
    assert fixed.update(5.0, 32) == 0.1  # no target: a fixed coefficient


def test_bad_controller_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="target must be positive"):
        KlController(0.1, target=0.0)
    with pytest.raises(ValueError, match="horizon"):
        KlController(0.1, target=0.1, horizon=0)


def test_the_kl_fed_back_is_the_mean_of_sequence_means() -> None:
    # Sequences of 1 and 3 tokens: means 4 and 1 -> 2.5 (a token mean would give 7 / 4 = 1.75).
    assert sequence_mean_kl([np.array([4.0]), np.array([0.0, 1.0, 2.0])]) == pytest.approx(2.5)
