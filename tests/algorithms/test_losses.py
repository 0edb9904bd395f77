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
