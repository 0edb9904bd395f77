"""Per-token KL estimators between the policy and the frozen reference (Schulman, "Approximating
KL divergence", 2020). Both are unbiased for KL(p || p_ref) when tokens are sampled from p."""

from __future__ import annotations

from typing import Literal

import torch

KlEstimator = Literal["k1", "k3"]
# exp() of a log-ratio past this overflows float32 long before it means anything.
_MAX_LOG_RATIO = 20.0


def kl_per_token(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: KlEstimator) -> torch.Tensor:
    """KL estimate per token from the log-probs of the sampled tokens under the policy and the reference.

    ``k1 = log p - log p_ref`` (can be negative per token); ``k3 = (r - 1) - log r`` with
    ``r = p_ref / p`` (never negative, lower variance).
    """
    if estimator == "k1":
        return logp - ref_logp
    if estimator == "k3":
        log_r = torch.clamp(ref_logp - logp, -_MAX_LOG_RATIO, _MAX_LOG_RATIO)
        return torch.expm1(log_r) - log_r
    raise ValueError(f"unknown KL estimator {estimator!r}; valid: k1, k3")
