"""The async schedule's off-policy correction: truncated importance weights, by hand and in the real update."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlsim.algorithms.experience import Experience
from rlsim.algorithms.off_policy import correct_off_policy, truncated_is_weights
from rlsim.rollout.types import Rollout


def logs(*p: float) -> np.ndarray:
    return np.log(np.array(p, dtype=np.float32))


def test_weights_are_the_probability_ratio_truncated_at_the_cap() -> None:
    # pi_prox / mu = 0.5/0.5, 0.2/0.4, 0.9/0.1 = 1, 0.5, 9 -> 9 truncated at 2.
    w = truncated_is_weights(logs(0.5, 0.2, 0.9), logs(0.5, 0.4, 0.1), cap=2.0)
    np.testing.assert_allclose(w, [1.0, 0.5, 2.0], rtol=1e-6)


def test_an_extreme_ratio_stays_finite() -> None:
    w = truncated_is_weights(np.array([0.0], np.float32), np.array([-1e4], np.float32), cap=3.0)
    assert w.tolist() == [3.0]


def test_each_token_advantage_is_scaled_by_its_weight() -> None:
    r = Rollout(0, 0, [1], [5, 6, 7], behaviour_logprobs=logs(0.5, 0.4, 0.1).tolist())
    exp = Experience(old_logprobs={0: logs(0.5, 0.2, 0.9)}, advantages={0: np.array([1.0, -2.0, 3.0], np.float32)})
    out, stats = correct_off_policy(exp, [r], cap=2.0)
    np.testing.assert_allclose(out.advantages[0], [1.0, -1.0, 6.0], rtol=1e-6)  # x [1, 0.5, 2]
    assert stats.is_weight_mean == pytest.approx(3.5 / 3, rel=1e-6)
    assert stats.is_truncated_fraction == pytest.approx(1 / 3)
    assert stats.is_ratio_mean == pytest.approx((1 + 0.5 + 9) / 3, rel=1e-5)
    np.testing.assert_array_equal(exp.advantages[0], [1.0, -2.0, 3.0])  # the input is left as it was


def test_a_rollout_without_behaviour_logprobs_is_refused() -> None:
    exp = Experience(old_logprobs={0: logs(0.5)}, advantages={0: np.ones(1, np.float32)})
    with pytest.raises(ValueError, match="carry no behaviour log-probs"):
        correct_off_policy(exp, [Rollout(0, 0, [1], [5])], cap=2.0)


def test_in_the_update_a_uniform_weight_of_two_doubles_the_loss(tiny_policy) -> None:
    from tests.loop.test_trainer import make, rollouts

    batch = rollouts()
    rewards = {r.uid: float(r.uid % 3) for r in batch}
    plain = make(tiny_policy).train_step(batch, rewards)
    proximal = make(tiny_policy).policy_logprobs(batch)
    # Behaviour log-probs log(2) below the trainer's own: every weight is 2 (cap 4), so the surrogate
    # loss, a token mean of -w * A at ratio 1 before the step, is exactly twice the plain one.
    for r in batch:
        r.behaviour_logprobs = (proximal[r.uid] - math.log(2.0)).tolist()
    corrected = make(tiny_policy, is_cap=4.0).train_step(batch, rewards)
    assert plain.loss != 0.0
    assert corrected.loss == pytest.approx(2 * plain.loss, rel=1e-4)
    assert corrected.is_weight_mean == pytest.approx(2.0, rel=1e-5) and corrected.is_truncated_fraction == 0.0
    # On-policy (behaviour == proximal) the correction changes nothing.
    for r in batch:
        r.behaviour_logprobs = proximal[r.uid].tolist()
    same = make(tiny_policy, is_cap=4.0).train_step(batch, rewards)
    assert same.loss == pytest.approx(plain.loss, rel=1e-5) and same.is_weight_mean == pytest.approx(1.0, rel=1e-6)


def test_a_floor_bounds_the_weights_from_below_as_openrlhf_tis() -> None:
    # pi_prox / mu = 0.5/0.5 = 1; 0.1/0.5 = 0.2 -> floored at 0.5; 0.9/0.1 = 9 -> capped at 5.
    w = truncated_is_weights(logs(0.5, 0.1, 0.9), logs(0.5, 0.5, 0.1), cap=5.0, floor=0.5)
    np.testing.assert_allclose(w, [1.0, 0.5, 5.0], rtol=1e-6)
    r = Rollout(0, 0, [1], [5, 6, 7], behaviour_logprobs=logs(0.5, 0.5, 0.1).tolist())
    exp = Experience(old_logprobs={0: logs(0.5, 0.1, 0.9)}, advantages={0: np.ones(3, np.float32)})
    corrected, stats = correct_off_policy(exp, [r], cap=5.0, floor=0.5)
    np.testing.assert_allclose(corrected.advantages[0], [1.0, 0.5, 5.0], rtol=1e-6)
    assert stats.is_truncated_fraction == pytest.approx(2 / 3)  # both bounds count
