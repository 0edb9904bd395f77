"""The clipped policy surrogate, the clipped value loss and the entropy on hand-worked numbers."""

from __future__ import annotations

import math

import torch

from rlsim.algorithms.losses import clipped_policy_loss, clipped_value_loss, entropy_from_logits


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
