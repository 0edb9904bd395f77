"""The async schedule's off-policy correction: importance weights per token or per rollout, truncated or
masked, by hand and in the real update."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlsim.algorithms.experience import Experience
from rlsim.algorithms.off_policy import IsCorrection, correct_off_policy, importance_weights
from rlsim.rollout.types import Rollout


def logs(*p: float) -> np.ndarray:
    return np.log(np.array(p, dtype=np.float32))


def truncated_is_weights(proximal: np.ndarray, behaviour: np.ndarray, cap: float, floor: float | None = None):
    return importance_weights(proximal, behaviour, IsCorrection(cap, floor))[0]


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
    out, stats = correct_off_policy(exp, [r], IsCorrection(cap=2.0))
    np.testing.assert_allclose(out.advantages[0], [1.0, -1.0, 6.0], rtol=1e-6)  # x [1, 0.5, 2]
    assert stats.is_weight_mean == pytest.approx(3.5 / 3, rel=1e-6)
    assert stats.is_truncated_fraction == pytest.approx(1 / 3)
    assert stats.is_ratio_mean == pytest.approx((1 + 0.5 + 9) / 3, rel=1e-5)
    np.testing.assert_array_equal(exp.advantages[0], [1.0, -2.0, 3.0])  # the input is left as it was


def test_a_rollout_without_behaviour_logprobs_is_refused() -> None:
    exp = Experience(old_logprobs={0: logs(0.5)}, advantages={0: np.ones(1, np.float32)})
    with pytest.raises(ValueError, match="carry no behaviour log-probs"):
        correct_off_policy(exp, [Rollout(0, 0, [1], [5])], IsCorrection(cap=2.0))


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
    # log(2) below again, sequence_mask: every rollout's product ratio 2^len >= 2^4 is above the cap 4, so
    # every rollout is masked, every weight is 0 and with it the surrogate loss (no KL here).
    for r in batch:
        r.behaviour_logprobs = (proximal[r.uid] - math.log(2.0)).tolist()
    masked = make(tiny_policy, is_cap=4.0, is_level="sequence", is_mode="mask").train_step(batch, rewards)
    assert masked.loss == 0.0 and masked.is_weight_mean == 0.0
    assert (masked.is_masked_fraction, masked.is_seq_masked_fraction, masked.is_truncated_fraction) == (1.0, 1.0, 0.0)


def test_a_floor_bounds_the_weights_from_below_as_openrlhf_tis() -> None:
    # pi_prox / mu = 0.5/0.5 = 1; 0.1/0.5 = 0.2 -> floored at 0.5; 0.9/0.1 = 9 -> capped at 5.
    w = truncated_is_weights(logs(0.5, 0.1, 0.9), logs(0.5, 0.5, 0.1), cap=5.0, floor=0.5)
    np.testing.assert_allclose(w, [1.0, 0.5, 5.0], rtol=1e-6)
    r = Rollout(0, 0, [1], [5, 6, 7], behaviour_logprobs=logs(0.5, 0.5, 0.1).tolist())
    exp = Experience(old_logprobs={0: logs(0.5, 0.1, 0.9)}, advantages={0: np.ones(3, np.float32)})
    corrected, stats = correct_off_policy(exp, [r], IsCorrection(cap=5.0, floor=0.5))
    np.testing.assert_allclose(corrected.advantages[0], [1.0, 0.5, 5.0], rtol=1e-6)
    assert stats.is_truncated_fraction == pytest.approx(2 / 3)  # both bounds count


# Three ragged rollouts, ratios pi_prox / mu per token (proximal / behaviour probabilities), cap 3, floor 0.6:
#   A, 1 token: 0.8/0.2 = 4                                      product 4
#   B, 3 tokens: 0.6/0.4 = 1.5 each, every one inside [0.6, 3]; product 1.5^3 = 3.375, above the cap
#   C, 2 tokens: 0.5/0.25 = 2 and 0.25/0.5 = 0.5 (below the floor); product 1
PROXIMAL = [logs(0.8), logs(0.6, 0.6, 0.6), logs(0.5, 0.25)]
BEHAVIOUR = [logs(0.2), logs(0.4, 0.4, 0.4), logs(0.25, 0.5)]
ADVANTAGES = [[1.0], [1.0, -1.0, 2.0], [-2.0, 1.0]]
# Per (level, mode): the weights of A | B | C, then (weight mean, ratio mean, truncated and masked fractions
# of the 6 tokens, truncated and masked fractions of the 3 rollouts). The ratio mean is over tokens at the
# token level, (4 + 1.5 x 3 + 2 + 0.5) / 6 = 11/6, and over rollouts at the sequence level, (4 + 3.375 + 1) / 3.
HAND = {
    # A capped at 3, C's 0.5 floored at 0.6: mean (3 + 4.5 + 2.6) / 6; A's and C's token moved, 2 of 6.
    ("token", "truncate"): ([3.0], [1.5, 1.5, 1.5], [2.0, 0.6], 10.1 / 6, 11 / 6, 2 / 6, 0.0, 2 / 3, 0.0),
    # A's 4 and C's 0.5 leave [0.6, 3]: weight 0; the others keep their ratio. Mean (4.5 + 2) / 6.
    ("token", "mask"): ([0.0], [1.5, 1.5, 1.5], [2.0, 0.0], 6.5 / 6, 11 / 6, 0.0, 2 / 6, 0.0, 2 / 3),
    # A's 4 and B's 3.375 capped at 3 for all their tokens, C's 1 kept: mean (3 + 9 + 2) / 6; A and B moved.
    ("sequence", "truncate"): ([3.0], [3.0, 3.0, 3.0], [1.0, 1.0], 14 / 6, 8.375 / 3, 4 / 6, 0.0, 2 / 3, 0.0),
    # A and B masked whole (4 of 6 tokens), C kept at its ratio 1: mean 2 / 6.
    ("sequence", "mask"): ([0.0], [0.0, 0.0, 0.0], [1.0, 1.0], 2 / 6, 8.375 / 3, 0.0, 4 / 6, 0.0, 2 / 3),
}


@pytest.mark.parametrize(("level", "mode"), sorted(HAND))
def test_each_level_and_mode_on_ragged_rollouts_worked_by_hand(level: str, mode: str) -> None:
    *expected, weight_mean, ratio_mean, truncated, masked, seq_truncated, seq_masked = HAND[(level, mode)]
    rule = IsCorrection(cap=3.0, floor=0.6, level=level, mode=mode)  # type: ignore[arg-type]
    batch = [Rollout(uid, 0, [1], [5] * len(b), behaviour_logprobs=b.tolist()) for uid, b in enumerate(BEHAVIOUR)]
    adv = {uid: np.array(a, np.float32) for uid, a in enumerate(ADVANTAGES)}
    exp = Experience(old_logprobs=dict(enumerate(PROXIMAL)), advantages=adv)
    out, stats = correct_off_policy(exp, batch, rule)
    for uid, w in enumerate(expected):
        np.testing.assert_allclose(importance_weights(PROXIMAL[uid], BEHAVIOUR[uid], rule)[0], w, rtol=1e-5)
        np.testing.assert_allclose(out.advantages[uid], np.array(ADVANTAGES[uid]) * w, rtol=1e-5)
    assert stats.is_weight_mean == pytest.approx(weight_mean, rel=1e-5)
    assert stats.is_ratio_mean == pytest.approx(ratio_mean, rel=1e-5)
    assert (stats.is_truncated_fraction, stats.is_masked_fraction) == pytest.approx((truncated, masked))
    assert (stats.is_seq_truncated_fraction, stats.is_seq_masked_fraction) == pytest.approx((seq_truncated, seq_masked))


def test_a_sequence_below_the_floor_whose_tokens_are_all_inside() -> None:
    # Three tokens at 0.4/0.5 = 0.8 each, inside [0.6, 3]; product 0.512 is below the floor 0.6.
    proximal, behaviour = logs(0.4, 0.4, 0.4), logs(0.5, 0.5, 0.5)
    token = importance_weights(proximal, behaviour, IsCorrection(3.0, 0.6))[0]
    np.testing.assert_allclose(token, [0.8, 0.8, 0.8], rtol=1e-6)  # untouched at the token level
    weights, ratio = importance_weights(proximal, behaviour, IsCorrection(3.0, 0.6, "sequence"))
    np.testing.assert_allclose(weights, [0.6, 0.6, 0.6], rtol=1e-6)  # floored, one weight for all three
    np.testing.assert_allclose(ratio, [0.512], rtol=1e-5)
    masked = importance_weights(proximal, behaviour, IsCorrection(3.0, 0.6, "sequence", "mask"))[0]
    assert masked.tolist() == [0.0, 0.0, 0.0]
    # Without a floor the mask keeps it at its ratio (TRL's clip_min None: no lower bound).
    kept = importance_weights(proximal, behaviour, IsCorrection(3.0, None, "sequence", "mask"))[0]
    np.testing.assert_allclose(kept, [0.512] * 3, rtol=1e-5)


def test_an_extreme_sequence_ratio_stays_finite_and_is_masked_or_capped() -> None:
    # 100 tokens each 1e4 nats more likely under pi_prox: the summed log-ratio 1e6 would overflow exp.
    proximal, behaviour = np.zeros(100, np.float32), np.full(100, -1e4, np.float32)
    assert set(importance_weights(proximal, behaviour, IsCorrection(3.0, level="sequence"))[0].tolist()) == {3.0}
    rule = IsCorrection(3.0, level="sequence", mode="mask")
    weights, ratio = importance_weights(proximal, behaviour, rule)
    assert set(weights.tolist()) == {0.0} and np.isfinite(ratio).all()
