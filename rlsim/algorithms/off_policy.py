"""Off-policy correction for the async schedule: a truncated importance weight per token.

A rollout trained ``k`` versions after it was generated was sampled by an older (behaviour) policy
``mu``. The trainer recomputes every token's log-prob under its current weights before the update
(``pi_prox``, the policy the PPO ratio is taken against), so the update is AReaL's decoupled objective:

    loss_t = - w_t * min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t),   r_t = pi_theta / pi_prox,
    w_t = min(pi_prox(a_t) / mu(a_t), is_cap)                          (no gradient through w_t)

The weight is truncated (Truncated Importance Sampling, as verl's ``tis_imp_ratio_cap``) rather than
masked past the cap (AReaL's ``behav_imp_weight_cap``): a token far off-policy still counts, at most
``is_cap`` times, so a batch never loses tokens silently and the variance stays bounded. Since
``w_t > 0`` and is constant in ``theta``, ``w_t * min(r A, clip(r) A) == min(r (w A), clip(r) (w A))``:
scaling each token's advantage by ``w_t`` is the whole correction, and the loss code is unchanged.
On-policy tokens (``mu == pi_prox``) get ``w_t == 1`` up to the two engines' numerics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from rlsim.algorithms.experience import Experience
from rlsim.rollout.types import Rollout


@dataclass(frozen=True)
class OffPolicyStats:
    """Over all response tokens of a batch: the weights' mean after truncation, the fraction truncated,
    and the mean untruncated ratio (how far the behaviour policy drifted; 1 on-policy)."""

    is_weight_mean: float
    is_truncated_fraction: float
    is_ratio_mean: float


def truncated_is_weights(
    proximal: np.ndarray, behaviour: np.ndarray, cap: float, floor: float | None = None
) -> np.ndarray:
    """``clip(exp(proximal - behaviour), floor, cap)`` per token (``floor`` None: no lower bound);
    log-probs in nats, float32 ``(tokens,)``. OpenRLHF's token-level TIS bounds both sides, by
    default at [0.5, 5] (``--algo.advantage.is_correction_threshold`` in ``openrlhf/cli/train_ppo_ray.py``,
    applied in ``openrlhf/models/loss.py`` ``PolicyLoss``); verl's and rlsim's cap only."""
    if proximal.shape != behaviour.shape:
        raise ValueError(f"{proximal.shape[0]} proximal log-probs for {behaviour.shape[0]} behaviour log-probs")
    # Clipping the log-ratio first keeps exp() finite; any value above log(cap) ends at cap anyway.
    log_ratio = np.minimum(proximal.astype(np.float64) - behaviour.astype(np.float64), np.log(cap) + 1.0)
    w = np.minimum(np.exp(log_ratio), cap)
    if floor is not None:
        w = np.maximum(w, floor)
    return w.astype(np.float32)


def correct_off_policy(
    exp: Experience, rollouts: Sequence[Rollout], cap: float, floor: float | None = None
) -> tuple[Experience, OffPolicyStats]:
    """``exp`` with each token's advantage scaled by its truncated weight (``exp.old_logprobs`` are the
    proximal log-probs); raises ``ValueError`` if a rollout carries no behaviour log-probs.
    ``is_truncated_fraction`` counts tokens moved by either bound."""
    missing = [r.uid for r in rollouts if r.behaviour_logprobs is None]
    if missing:
        raise ValueError(
            f"{len(missing)} rollouts carry no behaviour log-probs (first uids {missing[:5]}); the "
            "generator must be asked for them (GeneratorSettings.behaviour_logprobs)"
        )
    advantages, weights, ratios = {}, [], []
    for r in rollouts:
        behaviour = np.asarray(r.behaviour_logprobs, dtype=np.float32)
        w = truncated_is_weights(exp.old_logprobs[r.uid], behaviour, cap, floor)
        advantages[r.uid] = (exp.advantages[r.uid] * w).astype(np.float32)
        weights.append(w)
        ratios.append(np.exp(np.minimum(exp.old_logprobs[r.uid].astype(np.float64) - behaviour, 50.0)))
    w_all, r_all = np.concatenate(weights), np.concatenate(ratios)
    moved = (r_all > cap) | (r_all < floor) if floor is not None else r_all > cap
    stats = OffPolicyStats(float(w_all.mean()), float(moved.mean()), float(r_all.mean()))
    return replace(exp, advantages=advantages), stats
