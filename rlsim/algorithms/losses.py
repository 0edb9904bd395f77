"""PPO's per-token losses: the clipped policy surrogate, the clipped value loss, and the entropy.

Each returns per-token values; the caller decides how to aggregate (rlsim takes the mean over all
response tokens of the batch, so micro-batching does not change the gradient).
"""

from __future__ import annotations

import torch


def clipped_policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip_eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(-min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A), clipped)`` per token, ``ratio = p / p_old``.

    ``clipped`` (bool) marks tokens whose ratio left the trust region.
    """
    ratio = torch.exp(logp - old_logp)
    surrogate = torch.minimum(ratio * advantages, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages)
    return -surrogate, (ratio - 1).abs() > clip_eps


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, value_clip: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(0.5 * max((V - R)^2, (V_clip - R)^2), clipped)`` per token, ``V_clip`` within ``value_clip``
    of the values seen when the batch was collected; ``value_clip`` None: the plain squared error."""
    plain = (values - returns) ** 2
    if value_clip is None:
        return 0.5 * plain, torch.zeros_like(plain, dtype=torch.bool)
    clipped_values = old_values + torch.clamp(values - old_values, -value_clip, value_clip)
    clipped = (clipped_values - returns) ** 2
    return 0.5 * torch.maximum(plain, clipped), clipped > plain


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last axis, in nats: ``logsumexp(l) - sum(softmax(l) * l)``."""
    logits = logits.float()
    return torch.logsumexp(logits, dim=-1) - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)
