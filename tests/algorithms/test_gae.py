"""GAE and token-level rewards against values worked out by hand (see each test's comment)."""

from __future__ import annotations

import pytest
import torch

from rlsim.algorithms.gae import gae, masked_whiten, token_level_rewards

R = torch.tensor([[0.0, 0.0, 1.0]])
V = torch.tensor([[0.5, 0.6, 0.7]])
M = torch.ones(1, 3)


def close(x: torch.Tensor, expected: list) -> None:
    torch.testing.assert_close(x, torch.tensor(expected), rtol=0, atol=1e-6)


def test_gamma_1_lam_1_is_monte_carlo_return_minus_value() -> None:
    # Every return is the final reward 1; advantages 1 - V = 0.5, 0.4, 0.3.
    adv, ret = gae(R, V, M, gamma=1.0, lam=1.0)
    close(adv, [[0.5, 0.4, 0.3]])
    close(ret, [[1.0, 1.0, 1.0]])


def test_lam_0_is_the_one_step_td_error() -> None:
    # delta_t = r_t + V_{t+1} - V_t: 0 + 0.6 - 0.5, 0 + 0.7 - 0.6, 1 + 0 - 0.7; returns = delta + V.
    adv, ret = gae(R, V, M, gamma=1.0, lam=0.0)
    close(adv, [[0.1, 0.1, 0.3]])
    close(ret, [[0.6, 0.7, 1.0]])


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_gamma_0_sees_only_the_immediate_reward(lam: float) -> None:
    # gamma 0: A_t = r_t - V_t whatever lam; the return is the reward itself.
    adv, ret = gae(R, V, M, gamma=0.0, lam=lam)
    close(adv, [[-0.5, -0.6, 0.3]])
    close(ret, [[0.0, 0.0, 1.0]])


def test_intermediate_gamma_and_lam() -> None:
    # gamma = lam = 0.5: deltas 0.5*0.6-0.5 = -0.2, 0.5*0.7-0.6 = -0.25, 1-0.7 = 0.3;
    # A2 = 0.3, A1 = -0.25 + 0.25*0.3 = -0.175, A0 = -0.2 + 0.25*(-0.175) = -0.24375.
    adv, _ = gae(R, V, M, gamma=0.5, lam=0.5)
    close(adv, [[-0.24375, -0.175, 0.3]])


def test_padding_never_reaches_real_tokens() -> None:
    # Row 2 has two real tokens and a padded slot holding a huge value: with gamma = lam = 1 its
    # advantages are 2 - 1 = 1 at both tokens (the return is 2), and 0 on the padding.
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    values = torch.tensor([[0.5, 0.6, 0.7], [1.0, 1.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv, ret = gae(rewards, values, mask, 1.0, 1.0)
    close(adv, [[0.5, 0.4, 0.3], [1.0, 1.0, 0.0]])
    close(ret, [[1.0, 1.0, 1.0], [2.0, 2.0, 0.0]])


def test_gamma_or_lam_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gae(R, V, M, gamma=1.1, lam=0.9)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gae(R, V, M, gamma=0.9, lam=-0.1)


def test_score_sits_on_the_last_real_token_and_kl_on_every_token() -> None:
    scores = torch.tensor([1.0, 2.0])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.5, 0.5, 9.0]])
    close(token_level_rewards(scores, mask), [[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    # coef 0.5: 1 - 0.15 on row 1's last token; the padded KL of 9 is ignored.
    close(token_level_rewards(scores, mask, kl, 0.5), [[-0.05, -0.1, 0.85], [-0.25, 1.75, 0.0]])


def test_an_empty_response_is_refused() -> None:
    with pytest.raises(ValueError, match="no tokens"):
        token_level_rewards(torch.tensor([1.0]), torch.zeros(1, 3))


def test_whitening_uses_only_masked_entries() -> None:
    x = torch.tensor([[1.0, 3.0, 50.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    close(masked_whiten(x, mask), [[-1.0, 1.0, 0.0]])  # mean 2, population std 1
