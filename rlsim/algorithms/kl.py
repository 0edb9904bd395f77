"""Per-token KL estimators between the policy and the frozen reference (Schulman, "Approximating
KL divergence", 2020), with the clamps the frameworks put on them.

With ``d = log p - log p_ref`` for a token sampled from ``p``:

- ``k1 = d``: unbiased for KL(p || p_ref), can be negative per token;
- ``k2 = d^2 / 2``: biased, never negative; its gradient is that of the true KL's first-order term;
- ``k3 = (r - 1) - log r`` with ``r = p_ref / p``: unbiased, never negative, lower variance;
- ``k3+``: ``k3``'s value with ``k2``'s gradient (a straight-through estimator, verl's ``k3+``: the
  expected gradient of ``k1`` and ``k3`` is not that of the KL, ``k2``'s is).

Clamps (None turns each off): ``log_ratio_clamp`` bounds ``log r`` before ``exp`` in ``k3`` (rlsim
and verl: 20; OpenRLHF and TRL: none); ``clamp`` bounds the estimate itself to ``[-clamp, clamp]``
(verl: 10 on ``k3``; OpenRLHF: 10 on every estimator; rlsim and TRL: none). A rare token at
``log p = -9`` against ``log p_ref = -0.5`` gives ``k3 = e^8.5 - 1 - 8.5 = 4905`` unclamped, 10 clamped.

Sources: ``verl/trainer/ppo/core_algos.py`` ``kl_penalty`` / ``kl_penalty_forward``;
``openrlhf/models/utils.py`` ``compute_approx_kl``; ``trl/trainer/grpo_trainer.py`` ``_compute_loss``.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

KlEstimator = Literal["k1", "k2", "k3", "k3+"]
KL_ESTIMATORS: tuple[str, ...] = get_args(KlEstimator)
# rlsim's default: exp() of a log-ratio past this overflows float32 long before it means anything.
DEFAULT_LOG_RATIO_CLAMP = 20.0


def kl_per_token(
    logp: torch.Tensor,
    ref_logp: torch.Tensor,
    estimator: KlEstimator,
    log_ratio_clamp: float | None = DEFAULT_LOG_RATIO_CLAMP,
    clamp: float | None = None,
) -> torch.Tensor:
    """KL estimate per token from the log-probs of the sampled tokens under the policy and the reference."""
    if estimator == "k1":
        kl = logp - ref_logp
    elif estimator == "k2":
        kl = 0.5 * (logp - ref_logp) ** 2
    elif estimator in ("k3", "k3+"):
        log_r = ref_logp - logp
        if log_ratio_clamp is not None:
            log_r = torch.clamp(log_r, -log_ratio_clamp, log_ratio_clamp)
        kl = torch.expm1(log_r) - log_r
    else:
        raise ValueError(f"unknown KL estimator {estimator!r}; valid: {', '.join(KL_ESTIMATORS)}")
    if clamp is not None:
        kl = torch.clamp(kl, -clamp, clamp)
    if estimator == "k3+":
        k2 = 0.5 * (logp - ref_logp) ** 2
        kl = k2 - k2.detach() + kl.detach()
    return kl
