"""Off-policy correction for the async schedule: an importance weight per token, truncated or masked.

A rollout trained ``k`` versions after it was generated was sampled by an older (behaviour) policy
``mu``. The trainer recomputes every token's log-prob under its current weights before the update
(``pi_prox``, the policy the PPO ratio is taken against), so the update is AReaL's decoupled objective:

    loss_t = - w_t * min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t),   r_t = pi_theta / pi_prox,
    w_t = min(pi_prox(a_t) / mu(a_t), is_cap)                          (no gradient through w_t)

That is the default rule (``level: token``, ``mode: truncate``): Truncated Importance Sampling, as
verl's ``rollout_is: token`` and OpenRLHF's ``tis``. A token far off-policy still counts, at most
``is_cap`` times, so no token leaves a batch silently and the variance stays bounded. The frameworks
offer two more choices, both settings here:

- ``level: sequence``: one ratio per rollout, the product of its token ratios
  ``exp(sum_t log pi_prox / mu)``, bounded and then applied to every token of the rollout (verl's
  ``rollout_is: sequence`` in ``verl/trainer/ppo/rollout_corr_helper.py``
  ``compute_rollout_correction_weights``; TRL's ``sequence_*`` modes in ``trl/trainer/grpo_trainer.py``
  ``_generate_and_score_completions``). Unbiased for the whole sequence, and of high variance.
- ``mode: mask`` (rejection): a ratio outside ``[is_floor, is_cap]`` gives weight 0, one inside keeps
  its own, untruncated value (TRL's ``token_mask`` / ``sequence_mask``, OpenRLHF's ``icepop`` in
  ``openrlhf/models/loss.py`` ``PolicyLoss``). A masked token still counts in the loss's token count,
  as in TRL, which multiplies the per-token loss by 0; verl's rejection (``rollout_rs``) removes it
  from ``response_mask`` instead, so verl's token mean divides by fewer tokens.

Since ``w_t >= 0`` and is constant in ``theta``, ``w_t * min(r A, clip(r) A) == min(r (w A), clip(r) (w A))``
(and so for the dual clip and ``delta_clip`` bounds, linear in ``A`` too): scaling each token's
advantage by ``w_t`` is the whole correction, and the loss code is unchanged. On-policy tokens
(``mu == pi_prox``) get ``w_t == 1`` up to the two engines' numerics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:  # types only: the config imports this module's Literals, and must not load torch
    from rlsim.algorithms.experience import Experience
    from rlsim.rollout.types import Rollout

IsLevel = Literal["token", "sequence"]
IsMode = Literal["truncate", "mask"]


@dataclass(frozen=True)
class IsCorrection:
    """The weight's rule: bounds ``[floor, cap]`` (``floor`` None: none below), the ``level`` a ratio is
    taken at (each token, or each rollout as a whole) and the ``mode`` (clip into the bounds, or zero
    outside them)."""

    cap: float
    floor: float | None = None
    level: IsLevel = "token"
    mode: IsMode = "truncate"


@dataclass(frozen=True)
class OffPolicyStats:
    """What the correction did to a batch. Over all response tokens: ``is_weight_mean`` the weights' mean
    after the rule; ``is_truncated_fraction`` tokens whose weight a bound moved (truncate);
    ``is_masked_fraction`` tokens weighted 0 (mask). Over rollouts: ``is_seq_truncated_fraction`` /
    ``is_seq_masked_fraction`` those with at least one such token (at ``level: sequence``, those whose
    ratio was moved or masked; verl's ``rollout_rs_seq_masked_fraction``). ``is_ratio_mean``: the mean
    untruncated ratio over the units the bounds apply to (tokens, or rollouts at ``level: sequence``),
    i.e. how far the behaviour policy drifted; 1 on-policy."""

    is_weight_mean: float
    is_truncated_fraction: float
    is_ratio_mean: float
    is_masked_fraction: float = 0.0
    is_seq_truncated_fraction: float = 0.0
    is_seq_masked_fraction: float = 0.0


def bounded_ratios(log_ratio: np.ndarray, rule: IsCorrection) -> np.ndarray:
    """The weights of float64 log-ratios (nats, any shape) under ``rule``'s bounds and mode: truncate
    ``clip(r, floor, cap)``; mask ``r`` where ``floor <= r <= cap`` (TRL's kept range), else 0."""
    # Clipping the log-ratio first keeps exp() finite; any value above log(cap) ends at cap (or 0) anyway.
    r = np.exp(np.minimum(log_ratio, np.log(rule.cap) + 1.0))
    if rule.mode == "truncate":
        return np.clip(r, rule.floor, rule.cap)
    floor = 0.0 if rule.floor is None else rule.floor
    return np.where((r >= floor) & (r <= rule.cap), r, 0.0)


def importance_weights(
    proximal: np.ndarray, behaviour: np.ndarray, rule: IsCorrection
) -> tuple[np.ndarray, np.ndarray]:
    """``(weights, ratios)`` of one rollout from its tokens' log-probs (nats, ``(tokens,)``): float32
    weights per token, and the float64 untruncated ratio per unit (``(tokens,)``, or ``(1,)`` at
    ``level: sequence``, whose one weight every token carries)."""
    if proximal.shape != behaviour.shape:
        raise ValueError(f"{proximal.shape[0]} proximal log-probs for {behaviour.shape[0]} behaviour log-probs")
    log_ratio = proximal.astype(np.float64) - behaviour.astype(np.float64)
    if rule.level == "sequence":
        log_ratio = np.array([log_ratio.sum()])
    weights = np.broadcast_to(bounded_ratios(log_ratio, rule), proximal.shape).astype(np.float32)
    return weights, np.exp(np.minimum(log_ratio, 50.0))


def correct_off_policy(
    exp: Experience, rollouts: Sequence[Rollout], rule: IsCorrection
) -> tuple[Experience, OffPolicyStats]:
    """``exp`` with each token's advantage scaled by its weight (``exp.old_logprobs`` are the proximal
    log-probs); raises ``ValueError`` if a rollout carries no behaviour log-probs."""
    missing = [r.uid for r in rollouts if r.behaviour_logprobs is None]
    if missing:
        raise ValueError(
            f"{len(missing)} rollouts carry no behaviour log-probs (first uids {missing[:5]}); the "
            "generator must be asked for them (GeneratorSettings.behaviour_logprobs)"
        )
    advantages, weights, ratios, moved = {}, [], [], []
    for r in rollouts:
        behaviour = np.asarray(r.behaviour_logprobs, dtype=np.float32)
        w, ratio = importance_weights(exp.old_logprobs[r.uid], behaviour, rule)
        advantages[r.uid] = (exp.advantages[r.uid] * w).astype(np.float32)
        weights.append(w)
        ratios.append(ratio)
        moved.append(np.broadcast_to(_outside(ratio, rule), w.shape))
    stats = _stats(weights, ratios, moved, rule.mode)
    return replace(exp, advantages=advantages), stats


def _outside(ratio: np.ndarray, rule: IsCorrection) -> np.ndarray:
    """Per unit: the untruncated ratio lies outside the bounds, so the rule moved (or masked) it."""
    return (ratio > rule.cap) | (ratio < rule.floor) if rule.floor is not None else ratio > rule.cap


def _stats(
    weights: list[np.ndarray], ratios: list[np.ndarray], moved: list[np.ndarray], mode: IsMode
) -> OffPolicyStats:
    """The batch's figures from per-rollout weights, unit ratios and per-token "outside the bounds"."""
    tokens, sequences = np.concatenate(moved).mean(), np.mean([m.any() for m in moved])
    truncated, masked = (tokens, 0.0) if mode == "truncate" else (0.0, tokens)
    seq_truncated, seq_masked = (sequences, 0.0) if mode == "truncate" else (0.0, sequences)
    return OffPolicyStats(
        is_weight_mean=float(np.concatenate(weights).mean()),
        is_truncated_fraction=float(truncated),
        is_ratio_mean=float(np.concatenate(ratios).mean()),
        is_masked_fraction=float(masked),
        is_seq_truncated_fraction=float(seq_truncated),
        is_seq_masked_fraction=float(seq_masked),
    )
