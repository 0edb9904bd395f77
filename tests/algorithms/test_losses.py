"""The clipped policy surrogate, the clipped value loss and the entropy on hand-worked numbers."""

from __future__ import annotations

import math

import pytest
import torch

from rlsim.algorithms.losses import clipped_policy_loss, clipped_value_loss, entropy_from_logits, policy_loss_terms


def test_policy_surrogate_clips_only_in_the_direction_of_the_advantage() -> None:
    # ratios 1.5, 1.5, 0.5, 1.0 with advantages +1, -1, -1, +2 and eps 0.2:
    # +1: min(1.5, 1.2) = 1.2 -> loss -1.2 (clipped); -1: min(-1.5, -1.2) = -1.5 -> 1.5 (ratio still
    # outside the region, so counted as clipped); -1 at 0.5: min(-0.5, -0.8) = -0.8 -> 0.8; 1.0: -2.
    old = torch.zeros(4)
    new = torch.log(torch.tensor([1.5, 1.5, 0.5, 1.0]))
    loss, clipped = clipped_policy_loss(new, old, torch.tensor([1.0, -1.0, -1.0, 2.0]), 0.2)
    torch.testing.assert_close(loss, torch.tensor([-1.2, 1.5, 0.8, -2.0]))
    assert clipped.tolist() == [True, True, True, False]


def test_value_loss_takes_the_worse_of_plain_and_clipped() -> None:
    # V = 2 from old 1, return 3, clip 0.2: plain (2-3)^2 = 1, clipped V 1.2 -> 3.24; 0.5 * 3.24.
    # Second token moves within the clip: both terms equal (0.5 * 0.01).
    values, old, ret = torch.tensor([2.0, 1.1]), torch.tensor([1.0, 1.0]), torch.tensor([3.0, 1.0])
    loss, clipped = clipped_value_loss(values, old, ret, 0.2)
    torch.testing.assert_close(loss, torch.tensor([1.62, 0.005]))
    assert clipped.tolist() == [True, False]
    plain, none_clipped = clipped_value_loss(values, old, ret, None)
    torch.testing.assert_close(plain, torch.tensor([0.5, 0.005]))
    assert not none_clipped.any()


def test_entropy_of_uniform_and_peaked_logits() -> None:
    h = entropy_from_logits(torch.tensor([[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]]))
    assert abs(float(h[0]) - math.log(4)) < 1e-6
    assert float(h[1]) < 1e-6


def test_clip_fraction_counts_the_ratio_rlsim_way_and_the_taken_clip_verl_way() -> None:
    # One token, ratio 1.5, advantage -1, eps 0.2: the unclipped loss 1.5 beats the clipped 1.2, so the
    # clipped term is not the one taken (verl 0), but the ratio is outside [0.8, 1.2] (rlsim 1).
    t = policy_loss_terms(torch.log(torch.tensor([1.5])), torch.zeros(1), torch.tensor([-1.0]), 0.2)
    assert t.outside.tolist() == [True] and t.clipped.tolist() == [False]
    # Ratio 1.5, advantage +1: min(1.5, 1.2) = 1.2 is taken -> clipped for both.
    t = policy_loss_terms(torch.log(torch.tensor([1.5])), torch.zeros(1), torch.tensor([1.0]), 0.2)
    assert t.outside.tolist() == [True] and t.clipped.tolist() == [True]


def test_clip_higher_widens_only_the_upper_side() -> None:
    # eps_low 0.2, eps_high 0.28: ratio 1.25 with A = +1 is inside (loss -1.25); 1.3 is clipped at 1.28;
    # ratio 0.7 with A = -1 is clipped at 0.8 (loss max(0.7, 0.8) = 0.8).
    new = torch.log(torch.tensor([1.25, 1.3, 0.7]))
    t = policy_loss_terms(new, torch.zeros(3), torch.tensor([1.0, 1.0, -1.0]), 0.2, clip_eps_high=0.28)
    torch.testing.assert_close(t.loss, torch.tensor([-1.25, -1.28, 0.8]))
    assert t.outside.tolist() == [False, True, True] and t.clipped.tolist() == [False, True, True]


def test_dual_clip_bounds_the_loss_of_negative_advantages() -> None:
    # c = 3: ratio 5 with A = -1 -> plain PPO loss max(5, 1.2) = 5, dual clip min(5, 3) = 3. Ratio 2 with
    # A = -1 -> 2 < 3, untouched. Ratio 5 with A = +1 -> -1.2, positive advantages are never dual-clipped.
    new = torch.log(torch.tensor([5.0, 2.0, 5.0]))
    adv = torch.tensor([-1.0, -1.0, 1.0])
    plain = policy_loss_terms(new, torch.zeros(3), adv, 0.2)
    dual = policy_loss_terms(new, torch.zeros(3), adv, 0.2, dual_clip=3.0)
    torch.testing.assert_close(plain.loss, torch.tensor([5.0, 2.0, -1.2]))
    torch.testing.assert_close(dual.loss, torch.tensor([3.0, 2.0, -1.2]))
    assert dual.dual_clipped.tolist() == [True, False, False] and not plain.dual_clipped.any()


def test_the_policy_log_ratio_clamp_keeps_the_ratio_finite() -> None:
    # log-ratio 100 overflows float32 exp; clamped at 20 the ratio is e^20, with A = -1 the loss is e^20.
    t = policy_loss_terms(torch.tensor([100.0]), torch.zeros(1), torch.tensor([-1.0]), 0.2, log_ratio_clamp=20.0)
    assert float(t.loss) == pytest.approx(math.exp(20), rel=1e-6)
    assert math.isinf(float(policy_loss_terms(torch.tensor([100.0]), torch.zeros(1), torch.tensor([-1.0]), 0.2).loss))


def _loss_and_grad(ratio: float, advantage: float, **kw: float) -> tuple[float, float]:
    """The surrogate's loss at one token and its gradient in log p (old log p 0, eps 0.2)."""
    logp = torch.tensor([math.log(ratio)], requires_grad=True)
    t = policy_loss_terms(logp, torch.zeros(1), torch.tensor([advantage]), 0.2, **kw)  # type: ignore[arg-type]
    t.loss.sum().backward()
    assert logp.grad is not None
    return float(t.loss.detach()), float(logp.grad)


def test_trls_delta_clamps_the_unclipped_ratio_as_grpo_trainer_does() -> None:
    # Ratio 3, eps 0.2, delta 2 (TRL: coef_1 = min(3, 2) = 2, coef_2 = clip(3, 0.8, 1.2) = 1.2):
    # A = +1: -min(2 * 1, 1.2 * 1) = -1.2, the clipped term, constant in log p: gradient 0 (as without delta).
    assert _loss_and_grad(3.0, 1.0, delta_clip=2.0) == pytest.approx((-1.2, 0.0))
    assert _loss_and_grad(3.0, 1.0) == pytest.approx((-1.2, 0.0))
    # A = -1: -min(-2, -1.2) = 2, the clamped ratio, constant: gradient 0. Without delta: loss = ratio = 3,
    # gradient d(e^{log p})/d log p = 3.
    assert _loss_and_grad(3.0, -1.0, delta_clip=2.0) == pytest.approx((2.0, 0.0))
    assert _loss_and_grad(3.0, -1.0) == pytest.approx((3.0, 3.0))
    # Below delta nothing changes: ratio 1.5, A = -1 -> loss 1.5, gradient 1.5.
    assert _loss_and_grad(1.5, -1.0, delta_clip=2.0) == pytest.approx((1.5, 1.5))
    bounded = policy_loss_terms(torch.log(torch.tensor([3.0, 3.0])), torch.zeros(2), torch.tensor([1.0, -1.0]), 0.2)
    assert not bounded.dual_clipped.any()
    t = policy_loss_terms(
        torch.log(torch.tensor([3.0, 3.0])), torch.zeros(2), torch.tensor([1.0, -1.0]), 0.2, delta_clip=2.0
    )
    assert t.dual_clipped.tolist() == [False, True]  # counted as verl's pg_clipfrac_lower


@pytest.mark.parametrize("ratio", [0.5, 1.1, 1.5, 2.5, 3.0, 10.0])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_delta_above_the_upper_clip_is_the_dual_clip_at_c_equal_delta(ratio: float, advantage: float) -> None:
    # delta > 1 + eps: for A > 0 min(min(r, delta), clip(r)) = min(r, clip(r)); for A < 0 the loss is
    # min(max(r, clip(r)), delta) * |A|, the dual clip's min(max(r, clip(r)), c) * |A| at c = delta.
    assert _loss_and_grad(ratio, advantage, delta_clip=2.0) == pytest.approx(
        _loss_and_grad(ratio, advantage, dual_clip=2.0)
    )


def test_delta_and_dual_clip_together_take_the_smaller_bound() -> None:
    # Ratio 3, A = -1: delta 2 bounds the loss at 2, dual clip 2.5 at 2.5 -> 2; dual clip 1.5 -> 1.5.
    assert _loss_and_grad(3.0, -1.0, delta_clip=2.0, dual_clip=2.5) == pytest.approx((2.0, 0.0))
    assert _loss_and_grad(3.0, -1.0, delta_clip=2.0, dual_clip=1.5) == pytest.approx((1.5, 0.0))
