"""The actor's loss on one micro-batch: the clipped surrogate plus, with ``kl.target: loss``,
``kl.coef`` times the KL to the reference, each aggregated by the loss aggregation mode.

A pure function of per-token tensors, so the trainer's arithmetic is checked on hand-worked numbers
without a model. The two parts are returned apart because the frameworks log them apart: verl's
``actor/pg_loss`` is the surrogate alone and ``actor/kl_loss`` the aggregated KL before its
coefficient (``verl/workers/actor/dp_actor.py`` ``update_policy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rlsim.algorithms.aggregation import LossAggregation, token_weights
from rlsim.algorithms.experience import AlgorithmSettings
from rlsim.algorithms.kl import kl_per_token
from rlsim.algorithms.losses import PolicyLossTerms, policy_loss_terms


@dataclass(frozen=True)
class SurrogateSettings:
    """``clip_eps`` (low) and ``clip_eps_high`` (None: symmetric), ``dual_clip`` ``c`` and the policy
    ``log_ratio_clamp`` (None: off), the aggregation ``loss_agg`` and its ``loss_scale`` constant,
    TRL's ``delta_clip`` (None: off)."""

    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    dual_clip: float | None = None
    log_ratio_clamp: float | None = None
    loss_agg: LossAggregation = "token-mean"
    loss_scale: float | None = None
    delta_clip: float | None = None


@dataclass(frozen=True)
class ActorLoss:
    """``loss`` = ``policy_loss`` + ``kl_coef`` x ``kl_loss`` (scalars, with gradients); ``kl_loss``
    None when the KL is not in the loss; ``terms`` the surrogate's per-token parts."""

    loss: torch.Tensor
    policy_loss: torch.Tensor
    kl_loss: torch.Tensor | None
    terms: PolicyLossTerms


def actor_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    lengths: Sequence[int],
    batch: tuple[int, int],
    surrogate: SurrogateSettings,
    algorithm: AlgorithmSettings,
    ref_logp: torch.Tensor | None = None,
) -> ActorLoss:
    """The loss of a micro-batch of sequences with ``lengths`` tokens (flat ``(sum(lengths),)`` tensors
    in that order), part of an optimizer step's batch of ``batch = (sequences, tokens)``: summed over
    the micro-batches it gives the gradient of the whole batch's loss."""
    s = surrogate
    terms = policy_loss_terms(
        logp, old_logp, advantages, s.clip_eps, s.clip_eps_high, s.dual_clip, s.log_ratio_clamp, s.delta_clip
    )
    sequences, tokens = batch
    weights = None
    if s.loss_agg != "token-mean":  # token-mean keeps the plain sum / tokens, bit for bit as before
        weights = torch.from_numpy(token_weights(lengths, s.loss_agg, sequences, tokens, s.loss_scale)).to(logp.device)

    def aggregate(per_token: torch.Tensor) -> torch.Tensor:
        return per_token.sum() / tokens if weights is None else (per_token * weights).sum()

    policy_loss = aggregate(terms.loss)
    if not (algorithm.uses_reference and algorithm.kl_target == "loss"):
        return ActorLoss(policy_loss, policy_loss, None, terms)
    if ref_logp is None:
        raise ValueError("kl.target: loss needs the reference's log-probs")
    kl = kl_per_token(logp, ref_logp, algorithm.kl_estimator, algorithm.kl_log_ratio_clamp, algorithm.kl_clamp)
    kl_loss = aggregate(kl)
    return ActorLoss(policy_loss + algorithm.kl_coef * kl_loss, policy_loss, kl_loss, terms)
