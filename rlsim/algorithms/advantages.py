"""Group-normalised advantages (GRPO): each sample's reward compared with the other samples of its prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

# Group ids and rewards arrive as lists (from records) or as arrays (from the fidelity metrics).
Ints = Sequence[int] | np.ndarray
Floats = Sequence[float] | np.ndarray


def checked_rewards(groups: Ints, rewards: Floats) -> tuple[np.ndarray, np.ndarray]:
    """``(group ids, rewards as float64)`` after checking they pair up and every reward is finite."""
    if len(groups) != len(rewards):
        raise ValueError(f"{len(groups)} group ids for {len(rewards)} rewards")
    r = np.asarray(rewards, dtype=np.float64)
    if not np.all(np.isfinite(r)):
        bad = int(np.flatnonzero(~np.isfinite(r))[0])
        raise ValueError(f"reward {bad} is {r[bad]}; the scorer returned a non-finite value")
    return np.asarray(groups), r


def group_advantages(
    groups: Ints,
    rewards: Floats,
    normalize_std: bool = True,
    eps: float = 1e-6,
    ddof: int = 0,
    group_of_one: Literal["zero", "reward"] = "zero",
) -> np.ndarray:
    """Advantage per sample: ``(r - mean_g) / (std_g + eps)`` over the samples of the same group ``g``.

    ``std_g`` is the standard deviation of the group's rewards with ``ddof`` (0: population, rlsim's
    default; 1: Bessel's unbiased estimate, as verl, OpenRLHF and TRL use: ``torch.std``), so a group
    of identical rewards gets advantages of exactly 0 (nothing to learn) rather than NaN. ``eps``:
    rlsim and verl 1e-6, OpenRLHF 1e-9, TRL 1e-4 (``verl/trainer/ppo/core_algos.py``
    ``compute_grpo_outcome_advantage``, ``openrlhf/trainer/ppo_utils/experience_maker.py``
    ``compute_advantages_and_returns``, ``trl/trainer/grpo_trainer.py`` ``_generate_and_score_completions``).
    A group of one sample has nothing to compare with: ``group_of_one`` ``zero`` gives it 0 (rlsim);
    ``reward`` its raw reward (verl: mean 0 and std 1 for such a group).
    ``normalize_std=False`` keeps only the mean baseline (Dr. GRPO). Returns float32 ``(n,)``.
    """
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population std) or 1 (unbiased std), not {ddof}")
    g, r = checked_rewards(groups, rewards)
    adv = np.zeros_like(r)
    for gid in np.unique(g):
        members = g == gid
        if int(members.sum()) == 1:
            if group_of_one == "reward":  # verl: (r - 0) / (1 + eps), or r without the std
                adv[members] = r[members] / (1.0 + eps) if normalize_std else r[members]
            continue
        centred = r[members] - r[members].mean()
        adv[members] = centred / (r[members].std(ddof=ddof) + eps) if normalize_std else centred
    return adv.astype(np.float32)
