"""Generalised advantage estimation (Schulman et al. 2016) over response tokens, as verl's
``compute_gae_advantage_return`` and OpenRLHF's ``get_advantages_and_returns`` do it.

Tensors are right-padded ``(batch, T)`` over response tokens; ``mask`` is 1 on real tokens. The
reward model scores a whole response, so its score sits on the last response token; a per-token KL
penalty (``kl.target: reward``) is spread over every token.
"""

from __future__ import annotations

import torch


def token_level_rewards(
    scores: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, kl_coef: float = 0.0
) -> torch.Tensor:
    """``(batch, T)`` rewards: ``scores`` ``(batch,)`` on each row's last real token, minus ``kl_coef * kl``."""
    mask = mask.to(scores.dtype)
    lengths = mask.sum(dim=1).long()
    if bool((lengths == 0).any()):
        raise ValueError("a response has no tokens; every rollout needs at least one response token")
    rewards = torch.zeros_like(mask)
    rewards[torch.arange(len(scores)), lengths - 1] = scores
    if kl is not None and kl_coef:
        rewards = rewards - kl_coef * kl * mask
    return rewards


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)``, both ``(batch, T)`` and 0 on padding; ``returns = advantages + values``.

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` with ``V`` after the last token 0 (the episode ends
    there), and ``A_t = delta_t + gamma * lam * A_{t+1}``. Padding never feeds back into real tokens:
    the running value and advantage skip masked positions (verl's handling).
    """
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma ({gamma}) and lam ({lam}) must lie in [0, 1]")
    mask = mask.to(values.dtype)
    next_value = torch.zeros_like(values[:, 0])
    running = torch.zeros_like(values[:, 0])
    out = torch.zeros_like(values)
    with torch.no_grad():
        for t in reversed(range(values.shape[1])):
            m = mask[:, t]
            delta = rewards[:, t] + gamma * next_value - values[:, t]
            step = delta + gamma * lam * running
            next_value = values[:, t] * m + next_value * (1 - m)
            running = step * m + running * (1 - m)
            out[:, t] = running
        advantages = out * mask
        returns = (advantages + values) * mask
    return advantages, returns


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / std`` over the masked entries (population std), 0 elsewhere: PPO's advantage
    normalisation across the batch, so the policy step size does not depend on the reward scale."""
    m = mask.to(x.dtype)
    n = m.sum().clamp(min=1)
    mean = (x * m).sum() / n
    var = (((x - mean) * m) ** 2).sum() / n
    return (x - mean) * torch.rsqrt(var + eps) * m
