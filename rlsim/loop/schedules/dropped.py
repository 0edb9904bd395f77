"""Rollouts whose reward was dropped (``on_timeout: drop``): their groups are left out of the update.

A reward that can time out (``http``, ``function``, ``sandbox``; ``rlsim.rewards.options``) stands in NaN for
a dropped rollout and counts it as ``dropped`` in its score event's outcomes. GRPO's and RLOO's advantages
compare a group's members, so the whole group goes (verl filters whole groups too, for DAPO:
``algorithm.filter_groups``, ``verl/trainer/config/algorithm.py``); PPO
trains whole groups the same way. Any other NaN is a broken scorer, and stays an error: the NaN rewards
must be exactly the ones the score events counted as dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rlsim.errors import RlsimError
from rlsim.rollout.types import Event, Rollout


def dropped_count(events: Sequence[Event]) -> int:
    """Rollouts the score events say were dropped."""
    return sum(e.outcomes.get("dropped", 0) for e in events if e.phase == "score")


def dropped_uids(rewards: dict[int, float], counted: int) -> set[int]:
    """The uids with a dropped (NaN) reward; ``RuntimeError`` unless there are exactly ``counted`` of them."""
    nan = {u for u, x in rewards.items() if math.isnan(x)}
    if len(nan) != counted:
        raise RuntimeError(
            f"{len(nan)} rewards are NaN but the scorers dropped {counted}: a scorer returned a non-finite reward"
        )
    return nan


def drop_unrewarded(
    rollouts: list[Rollout], rewards: dict[int, float], events: Sequence[Event]
) -> tuple[list[Rollout], dict[int, float]]:
    """The rollouts to train on and their rewards: every group with a dropped reward left out whole."""
    nan = dropped_uids(rewards, dropped_count(events))
    if not nan:
        return rollouts, rewards
    groups = {r.group for r in rollouts if r.uid in nan}
    kept = [r for r in rollouts if r.group not in groups]
    if not kept:
        raise RlsimError(
            f"every group of the step had a reward dropped (on_timeout: drop; {len(nan)} of {len(rollouts)} "
            "rollouts unanswered), so nothing is left to train on; check that the reward server answers, or "
            "set on_timeout: default"
        )
    return kept, {r.uid: rewards[r.uid] for r in kept}
