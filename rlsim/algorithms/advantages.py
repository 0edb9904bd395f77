"""Group-normalised advantages (GRPO): each sample's reward compared with the other samples of its prompt."""

from __future__ import annotations

from collections.abc import Sequence

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


def group_advantages(groups: Ints, rewards: Floats, normalize_std: bool = True, eps: float = 1e-6) -> np.ndarray:
    """Advantage per sample: ``(r - mean_g) / (std_g + eps)`` over the samples of the same group ``g``.

    ``std_g`` is the population standard deviation (ddof=0) of the group's rewards, so a group of
    identical rewards gets advantages of exactly 0 (nothing to learn) rather than NaN.
    ``normalize_std=False`` keeps only the mean baseline (Dr. GRPO). Returns float32 ``(n,)``.
    """
    g, r = checked_rewards(groups, rewards)
    adv = np.zeros_like(r)
    for gid in np.unique(g):
        members = g == gid
        centred = r[members] - r[members].mean()
        adv[members] = centred / (r[members].std() + eps) if normalize_std else centred
    return adv.astype(np.float32)
