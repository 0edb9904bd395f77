"""PPO's per-token losses: the clipped policy surrogate, the clipped value loss, and the entropy.

Each returns per-token values; ``rlsim.algorithms.aggregation`` turns them into one number (by
default the mean over all response tokens of the batch, so micro-batching does not change the
gradient).

The surrogate's conventions are settings, each off (rlsim's behaviour) unless given:

- asymmetric clip ("clip-higher", DAPO): ``clip(ratio, 1 - eps_low, 1 + eps_high)``, as verl's
  ``clip_ratio_low``/``clip_ratio_high`` (``verl/trainer/ppo/core_algos.py``
  ``compute_policy_loss_vanilla``), OpenRLHF's ``eps_clip_low_high`` (``openrlhf/models/loss.py``
  ``PolicyLoss``) and TRL's ``epsilon_high`` (``trl/trainer/grpo_trainer.py`` ``_compute_loss``);
- dual clip (Ye et al. 2020): for ``A < 0`` the loss is at most ``-c * A``, so a token whose ratio
  has run far above 1 stops pushing (verl applies it always with ``clip_ratio_c: 3``; OpenRLHF only
  with ``--actor.dual_clip``);
- TRL's ``delta`` (INTELLECT-2's two-sided clip; ``trl/trainer/grpo_config.py`` ``delta``, applied in
  ``trl/trainer/grpo_trainer.py`` ``_compute_loss`` as ``coef_1 = clamp(coef_1, max=delta)`` before
  ``-min(coef_1 * A, coef_2 * A)``): the unclipped term's ratio is clamped at ``delta`` for every sign
  of ``A``. rlsim requires ``delta > 1 + eps_high`` (TRL recommends ``> 1 + eps`` and checks nothing),
  and there it only binds for ``A < 0``: the loss is ``min(max(r, clip(r)), delta) * |A|``, which is
  the dual clip at ``c = delta``, value and gradient. With both set the smaller bound holds;
- a clamp of the log-ratio before ``exp`` (verl and OpenRLHF clamp at +-20).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PolicyLossTerms:
    """Per token, ``(n,)``: ``loss``; ``outside`` (bool) the ratio left ``[1 - eps_low, 1 + eps_high]``
    (rlsim's ``clip_fraction``); ``clipped`` the clipped term is the one taken, i.e. the clipped loss
    is strictly above the unclipped one (verl's ``actor/pg_clipfrac``, OpenRLHF's ``clip_ratio``);
    ``dual_clipped`` a bound on the loss of a negative advantage, the dual clip's or ``delta_clip``'s,
    is the one taken (verl's ``actor/pg_clipfrac_lower``; all False without either)."""

    loss: torch.Tensor
    outside: torch.Tensor
    clipped: torch.Tensor
    dual_clipped: torch.Tensor


def policy_loss_terms(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_eps: float,
    clip_eps_high: float | None = None,
    dual_clip: float | None = None,
    log_ratio_clamp: float | None = None,
    delta_clip: float | None = None,
) -> PolicyLossTerms:
    """The clipped surrogate ``-min(ratio * A, clip(ratio, 1 - clip_eps, 1 + clip_eps_high) * A)`` per
    token, ``ratio = p / p_old``; ``clip_eps_high`` None: ``clip_eps``. ``dual_clip`` ``c`` (> 1): for
    ``A < 0`` the loss is ``min(that, -c * A)``. ``log_ratio_clamp``: ``log p - log p_old`` clamped to
    ``+-`` it before ``exp`` (None: no clamp). ``delta_clip``: TRL's ``delta``, the first term's ratio
    is ``min(ratio, delta)`` (None: off)."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    log_ratio = logp - old_logp
    if log_ratio_clamp is not None:
        log_ratio = torch.clamp(log_ratio, -log_ratio_clamp, log_ratio_clamp)
    ratio = torch.exp(log_ratio)
    unclipped = -(ratio if delta_clip is None else torch.clamp(ratio, max=delta_clip)) * advantages
    clipped_loss = -torch.clamp(ratio, 1 - clip_eps, 1 + high) * advantages
    loss = torch.maximum(unclipped, clipped_loss)
    lower = torch.zeros_like(loss, dtype=torch.bool)
    if delta_clip is not None:
        lower = (advantages < 0) & (ratio > delta_clip)
    if dual_clip is not None:
        bound = -dual_clip * advantages
        dual = (advantages < 0) & (loss > bound)
        loss = torch.where(dual, bound, loss)
        lower = lower | dual
    outside = (ratio - 1 > high) | (1 - ratio > clip_eps)
    return PolicyLossTerms(loss, outside, clipped_loss > unclipped, lower)


def clipped_policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip_eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(-min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A), outside)`` per token, ``ratio = p / p_old``.

    ``outside`` (bool) marks tokens whose ratio left the trust region (``policy_loss_terms`` has the rest).
    """
    terms = policy_loss_terms(logp, old_logp, advantages, clip_eps)
    return terms.loss, terms.outside


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
