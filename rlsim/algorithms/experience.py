"""The experience phase's arithmetic: from rewards, log-probs and values to per-token advantages.

Inputs arrive keyed by rollout uid, one float per response token, because the reference and the
critic may run in other processes (Ray actors) and answer micro-batch by micro-batch; nothing here
needs a model.

- ``grpo`` / ``rloo``: the group baseline (group-normalised / leave-one-out) on each sequence's
  score. With ``kl.target: reward``, ``kl.reward_form`` says where ``kl.coef`` x the KL goes:
  ``sequence`` (the default, verl's form) takes the sequence's summed KL off its score before the
  baseline and spreads the one advantage over its tokens (``apply_kl_penalty`` in
  ``verl/trainer/ppo/ray_trainer.py`` makes token-level rewards ``score - coef * KL``, and
  ``compute_grpo_outcome_advantage`` / ``compute_rloo_outcome_advantage`` in
  ``verl/trainer/ppo/core_algos.py`` sum them per sequence; TRL's RLOO does the same). ``token``
  (OpenRLHF's form: ``compute_advantages_and_returns`` in
  ``openrlhf/trainer/ppo_utils/experience_maker.py``) takes the baseline off the raw score first,
  then puts that on the last token and ``-coef * KL`` on every token (``compute_reward`` in
  ``openrlhf/models/utils.py``); each token's advantage is its undiscounted reward-to-go
  (``get_cumulative_returns``; OpenRLHF sets gamma to 1 for its group estimators and does not
  whiten them), so early tokens carry more of the penalty.
- ``ppo``: token-level rewards (score on the last token, minus ``coef * KL`` per token when
  ``kl.target: reward``), GAE with the critic's values, advantages whitened over the batch (as verl
  and OpenRLHF do); the returns are the critic's targets. ``kl.reward_form`` does not apply: the KL
  is per token in both forms (both frameworks put it there for GAE).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from rlsim.algorithms.advantages import group_advantages
from rlsim.algorithms.gae import gae, masked_whiten, token_level_rewards
from rlsim.algorithms.kl import DEFAULT_LOG_RATIO_CLAMP, KlEstimator, kl_per_token
from rlsim.algorithms.rloo import rloo_advantages
from rlsim.rollout.types import Rollout

if TYPE_CHECKING:
    import torch

Algorithm = Literal["grpo", "ppo", "rloo"]
PerToken = Mapping[int, np.ndarray]
KlRewardForm = Literal["sequence", "token"]


@dataclass(frozen=True)
class AlgorithmSettings:
    """``kl_coef`` 0 turns the KL (and the reference pass) off; ``kl_target``: ``reward`` or ``loss``."""

    algorithm: Algorithm = "grpo"
    gamma: float = 1.0
    lam: float = 0.95
    kl_coef: float = 0.0
    kl_estimator: KlEstimator = "k3"
    kl_target: Literal["reward", "loss"] = "loss"
    kl_reward_form: KlRewardForm = "sequence"  # grpo / rloo with kl_target reward (module docstring)
    normalize_std: bool = True
    std_ddof: int = 0  # group std: 0 population (rlsim), 1 unbiased (verl, OpenRLHF, TRL)
    std_eps: float = 1e-6
    group_of_one: Literal["zero", "reward"] = "zero"
    kl_log_ratio_clamp: float | None = DEFAULT_LOG_RATIO_CLAMP  # on k3's log r before exp (rlsim.algorithms.kl)
    kl_clamp: float | None = None  # on the estimate itself
    kl_target_value: float | None = None  # adaptive KL coefficient: the target KL (None: fixed coefficient)
    kl_horizon: int = 10000  # and its horizon in sequences (rlsim.algorithms.kl_control)

    @property
    def uses_reference(self) -> bool:
        return self.kl_coef > 0

    @property
    def uses_critic(self) -> bool:
        return self.algorithm == "ppo"


@dataclass
class Experience:
    """Everything the policy and critic updates need, per uid as float32 arrays of the rollout's
    response length: the behaviour policy's log-probs, the advantages; ``returns`` and ``values``
    only for ppo; ``kl`` (behaviour policy vs reference) and ``ref_logprobs`` only when the KL is on.
    ``sequence_rewards``: per uid the score, minus ``coef`` x its summed KL when ``kl.target: reward``
    (verl's summed token-level rewards, what its ``critic/rewards/mean`` averages), in both
    ``kl.reward_form``s: the token form's rewards sum to the baselined score minus the penalty
    instead (OpenRLHF's ``return``), which is no reward scale to chart."""

    old_logprobs: dict[int, np.ndarray]
    advantages: dict[int, np.ndarray]
    ref_logprobs: dict[int, np.ndarray] | None = None
    returns: dict[int, np.ndarray] | None = None
    values: dict[int, np.ndarray] | None = None
    kl: dict[int, np.ndarray] | None = None
    sequence_rewards: dict[int, float] | None = None

    def kl_mean(self) -> float | None:
        """Mean KL per response token over the batch (None when the KL is off)."""
        if self.kl is None:
            return None
        return float(np.concatenate(list(self.kl.values())).mean())


def make_experience(
    settings: AlgorithmSettings,
    rollouts: Sequence[Rollout],
    rewards: Mapping[int, float],
    old_logprobs: PerToken,
    ref_logprobs: PerToken | None = None,
    values: PerToken | None = None,
) -> Experience:
    """Advantages (and returns for ppo) for ``rollouts``; raises ``ValueError`` naming a missing input."""
    _check_inputs(settings, rollouts, rewards, old_logprobs, ref_logprobs, values)
    kl = _kl(settings, rollouts, old_logprobs, ref_logprobs) if settings.uses_reference else None
    old = {x.uid: np.asarray(old_logprobs[x.uid], dtype=np.float32) for x in rollouts}
    ref = None
    if ref_logprobs is not None and settings.uses_reference:
        ref = {x.uid: np.asarray(ref_logprobs[x.uid], dtype=np.float32) for x in rollouts}
    kl_in_reward = kl if settings.kl_target == "reward" else None
    summed = {x.uid: float(rewards[x.uid]) - _penalty(settings, kl_in_reward, x.uid) for x in rollouts}
    if settings.algorithm == "ppo":
        assert values is not None
        adv, ret = _ppo(settings, rollouts, rewards, values, kl)
        vals = {x.uid: np.asarray(values[x.uid], dtype=np.float32) for x in rollouts}
        return Experience(old, adv, ref, returns=ret, values=vals, kl=kl, sequence_rewards=summed)
    adv = _outcome_advantages(settings, rollouts, rewards, summed, kl_in_reward)
    return Experience(old_logprobs=old, advantages=adv, ref_logprobs=ref, kl=kl, sequence_rewards=summed)


def _outcome_advantages(
    settings: AlgorithmSettings,
    rollouts: Sequence[Rollout],
    rewards: Mapping[int, float],
    penalised: Mapping[int, float],
    kl_in_reward: dict[int, np.ndarray] | None,
) -> dict[int, np.ndarray]:
    """grpo / rloo per-token advantages in ``kl.reward_form`` (module docstring): the baseline on the
    ``penalised`` scores, constant over each sequence; or, in the token form with the KL in the
    reward, the baseline on the raw ``rewards`` and then each token's reward-to-go."""
    if kl_in_reward is None or settings.kl_reward_form == "sequence":
        seq = _baselined(settings, rollouts, [penalised[x.uid] for x in rollouts])
        return {x.uid: np.full(len(x.response_ids), a, dtype=np.float32) for x, a in zip(rollouts, seq, strict=True)}
    seq = _baselined(settings, rollouts, [float(rewards[x.uid]) for x in rollouts])
    return {
        x.uid: _reward_to_go(float(a), kl_in_reward[x.uid], settings.kl_coef)
        for x, a in zip(rollouts, seq, strict=True)
    }


def _penalty(settings: AlgorithmSettings, kl: dict[int, np.ndarray] | None, uid: int) -> float:
    """``coef`` x the sequence's summed KL when the KL is in the reward, else 0."""
    return settings.kl_coef * float(kl[uid].sum()) if kl is not None else 0.0


def _baselined(settings: AlgorithmSettings, rollouts: Sequence[Rollout], scores: Sequence[float]) -> np.ndarray:
    """One advantage per sequence: ``scores`` less their group's baseline (rloo / grpo), float32 ``(n,)``."""
    groups = [x.group for x in rollouts]
    if settings.algorithm == "rloo":
        return rloo_advantages(groups, scores)

    return group_advantages(
        groups, scores, settings.normalize_std, settings.std_eps, settings.std_ddof, settings.group_of_one
    )


def _reward_to_go(advantage: float, kl: np.ndarray, coef: float) -> np.ndarray:
    """The token form's advantages, float32 like ``kl``: token ``t``'s undiscounted sum of the rewards
    from ``t`` on, where ``advantage`` (the baselined score) sits on the last token and ``-coef * kl``
    on every token; so token ``t`` pays for its own KL and every later token's."""
    penalty_to_go = np.cumsum(np.asarray(kl, dtype=np.float64)[::-1])[::-1]
    return (advantage - coef * penalty_to_go).astype(np.float32)


def _check_inputs(
    settings: AlgorithmSettings,
    rollouts: Sequence[Rollout],
    rewards: Mapping[int, float],
    old: PerToken,
    ref: PerToken | None,
    values: PerToken | None,
) -> None:
    needed: list[tuple[str, Mapping | None]] = [("reward", rewards), ("policy log-probs", old)]
    if settings.uses_reference:
        needed.append(("reference log-probs (kl.coef > 0)", ref))
    if settings.uses_critic:
        needed.append(("critic values (ppo)", values))
    for what, table in needed:
        if table is None:
            raise ValueError(f"{settings.algorithm} needs {what}, and none were given")
        missing = [x.uid for x in rollouts if x.uid not in table]
        if missing:
            raise ValueError(f"{len(missing)} rollouts have no {what} (first uids {missing[:5]}); none may be lost")
        if what != "reward":
            bad = [x.uid for x in rollouts if len(table[x.uid]) != len(x.response_ids)]
            if bad:
                raise ValueError(
                    f"{what} of rollout {bad[0]}: {len(table[bad[0]])} values for "
                    f"{len(next(x for x in rollouts if x.uid == bad[0]).response_ids)} response tokens"
                )


def _kl(
    settings: AlgorithmSettings, rollouts: Sequence[Rollout], old: PerToken, ref: PerToken | None
) -> dict[int, np.ndarray]:

    assert ref is not None
    return {
        x.uid: kl_per_token(
            torch.as_tensor(old[x.uid], dtype=torch.float32),
            torch.as_tensor(ref[x.uid], dtype=torch.float32),
            settings.kl_estimator,
            settings.kl_log_ratio_clamp,
            settings.kl_clamp,
        )
        .detach()
        .numpy()
        for x in rollouts
    }


def _ppo(
    settings: AlgorithmSettings,
    rollouts: Sequence[Rollout],
    rewards: Mapping[int, float],
    values: PerToken,
    kl: dict[int, np.ndarray] | None,
) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Per uid: advantages (GAE, whitened over the batch) and returns (the critic's targets)."""

    uids = [x.uid for x in rollouts]
    v, mask = pad([values[u] for u in uids])
    kl_pad = pad([kl[u] for u in uids])[0] if kl is not None and settings.kl_target == "reward" else None
    scores = torch.tensor([float(rewards[u]) for u in uids], dtype=torch.float32)
    token_rewards = token_level_rewards(scores, mask, kl_pad, settings.kl_coef)
    adv, ret = gae(token_rewards, v, mask, settings.gamma, settings.lam)
    adv = masked_whiten(adv, mask)
    return unpad(adv, uids, rollouts), unpad(ret, uids, rollouts)


def pad(rows: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad 1-d arrays into ``(len(rows), longest)`` float32 and its 0/1 mask."""
    width = max((len(r) for r in rows), default=0)
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    mask = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(np.asarray(r, dtype=np.float32))
        mask[i, : len(r)] = 1
    return out, mask


def unpad(x: torch.Tensor, uids: Sequence[int], rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
    """Rows of ``x`` back to one array per uid, cut to each rollout's response length."""
    return {
        u: x[i, : len(r.response_ids)].numpy().astype(np.float32)
        for i, (u, r) in enumerate(zip(uids, rollouts, strict=True))
    }
