"""RLOO (REINFORCE leave-one-out): each sample's baseline is the mean reward of the *other* samples
of its prompt, so the baseline never depends on the sample it judges (Ahmadian et al. 2024)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlsim.algorithms.advantages import checked_rewards


def rloo_baseline(groups: Sequence[int], rewards: Sequence[float]) -> np.ndarray:
    """``b_i = (sum_g - r_i) / (n_g - 1)`` for sample ``i`` of group ``g`` (``n_g`` samples); float64 ``(n,)``.

    A group of one sample has no other sample to compare with: that is an error, not a zero baseline.
    """
    g, r = checked_rewards(groups, rewards)
    baseline = np.zeros_like(r)
    for gid in np.unique(g):
        members = g == gid
        n = int(members.sum())
        if n < 2:
            raise ValueError(f"group {gid} has {n} sample; RLOO needs >= 2 per prompt (workload.group_size)")
        baseline[members] = (r[members].sum() - r[members]) / (n - 1)
    return baseline


def rloo_advantages(groups: Sequence[int], rewards: Sequence[float]) -> np.ndarray:
    """``r_i - b_i`` (leave-one-out baseline), float32 ``(n,)``; not scaled by the group's spread."""
    _, r = checked_rewards(groups, rewards)
    return (r - rloo_baseline(groups, rewards)).astype(np.float32)
