"""The async schedule's buffer of scored rollouts and its ledger: which policy version made each rollout,
and what became of it.

Rollouts enter by complete group (a GRPO group compares samples of one prompt, so it is never split
across training batches). ``take_batch`` first drops every group older than the staleness bound, then
hands out the oldest complete groups as one batch. A group with a dropped reward (NaN: ``on_timeout: drop``,
``rlsim.loop.schedules.dropped``) is dropped whole once complete. The ledger gives every generated rollout
exactly one fate: trained, dropped as stale, dropped for its reward, or unfinished at the end of the run (in
flight or still queued).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from rlsim.rollout.types import Rollout


@dataclass
class ScoredGroup:
    """One prompt's ``group_size`` scored rollouts; ``version``: the oldest policy version that generated any
    of them (with partial rollouts a member that had sampled nothing before a weight swap starts newer)."""

    group: int
    version: int
    rollouts: list[Rollout]
    rewards: dict[int, float]


@dataclass
class Ledger:
    """Every generated rollout's behaviour version (by uid) and its fate once it has one."""

    versions: dict[int, int] = field(default_factory=dict)
    spans: dict[int, int] = field(default_factory=dict)  # uid -> versions from its first to its last token (partial)
    trained: dict[int, int] = field(default_factory=dict)  # uid -> staleness when trained
    dropped: set[int] = field(default_factory=set)  # as stale, or for a dropped reward (also in ``reward_dropped``)
    reward_dropped: set[int] = field(default_factory=set)

    def generated(self, rollouts: list[Rollout], version: int) -> None:
        """``version``: the weights the call was sent to run under; a rollout that records the versions that
        sampled it (partial rollouts) counts under the oldest of them instead."""
        doubled = [r.uid for r in rollouts if r.uid in self.versions]
        if doubled:
            raise RuntimeError(f"rollouts {doubled[:5]} were generated twice")
        self.versions.update((r.uid, version if r.first_version is None else r.first_version) for r in rollouts)
        self.spans.update((r.uid, r.version_span) for r in rollouts if r.version_span is not None)

    def mark_trained(self, uids: list[int], trainer_version: int) -> None:
        self._once(uids)
        self.trained.update((u, trainer_version - self.versions[u]) for u in uids)

    def mark_dropped(self, uids: list[int], for_reward: bool = False) -> None:
        self._once(uids)
        self.dropped.update(uids)
        if for_reward:
            self.reward_dropped.update(uids)

    @property
    def stale(self) -> int:
        """Rollouts dropped as stale."""
        return len(self.dropped) - len(self.reward_dropped)

    def _once(self, uids: list[int]) -> None:
        unknown = [u for u in uids if u not in self.versions]
        settled = [u for u in uids if u in self.trained or u in self.dropped]
        if unknown or settled:
            raise RuntimeError(
                f"rollout fates out of order: never generated {unknown[:5]}, already settled {settled[:5]}"
            )

    def totals(self) -> dict[str, int]:
        """``generated == trained + dropped_stale + dropped_reward + unfinished_at_end`` by construction; checked
        anyway (``dropped_reward`` only when there are any)."""
        out = {"generated": len(self.versions), "trained": len(self.trained), "dropped_stale": self.stale}
        if self.reward_dropped:
            out["dropped_reward"] = len(self.reward_dropped)
        out["unfinished_at_end"] = out["generated"] - out["trained"] - len(self.dropped)
        assert out["unfinished_at_end"] >= 0
        return out

    def span_histogram(self) -> dict[str, int]:
        """Trained rollouts that record their versions, by the versions from their first to their last token,
        ``{"0": n, "1": n}``."""
        return histogram_of(self.spans[u] for u in self.trained if u in self.spans)

    def histogram(self) -> dict[str, int]:
        """Trained rollouts per staleness (policy versions behind the trainer), ``{"0": n, "1": n, ...}``."""
        return histogram_of(self.trained.values())


def histogram_of(values: Iterable[int]) -> dict[str, int]:
    """Counts by value, keyed as results.json has them: ``{"0": n, "1": n, ...}`` in numeric order."""
    return {str(k): v for k, v in sorted(Counter(values).items())}


class StalenessBuffer:
    """Scored rollouts waiting for the trainer. ``group_size``: rollouts per group; ``groups_per_batch``:
    groups per training batch; ``max_staleness``: policy versions a trained rollout may lag."""

    def __init__(self, group_size: int, groups_per_batch: int, max_staleness: int, ledger: Ledger) -> None:
        self.group_size, self.groups_per_batch, self.max_staleness = group_size, groups_per_batch, max_staleness
        self.ledger = ledger
        self._incomplete: dict[int, ScoredGroup] = {}
        self._ready: list[ScoredGroup] = []

    @property
    def queued(self) -> int:
        """Scored rollouts waiting (complete groups and parts of groups)."""
        return sum(len(g.rollouts) for g in self._ready) + sum(len(g.rollouts) for g in self._incomplete.values())

    def add(self, rollouts: list[Rollout], rewards: dict[int, float]) -> None:
        """Scored rollouts (any subset of groups); a group becomes ready once all its members are in."""
        for r in rollouts:
            version = self.ledger.versions[r.uid]
            g = self._incomplete.setdefault(r.group, ScoredGroup(r.group, version, [], {}))
            if version != g.version and r.version_spans is None:  # one generate call made the group: a bug
                raise RuntimeError(f"group {r.group} mixes policy versions {g.version} and {version}")
            g.version = min(g.version, version)
            g.rollouts.append(r)
            g.rewards[r.uid] = rewards[r.uid]
            if len(g.rollouts) == self.group_size:
                done = self._incomplete.pop(r.group)
                if any(math.isnan(x) for x in done.rewards.values()):
                    self.ledger.mark_dropped([m.uid for m in done.rollouts], for_reward=True)
                else:
                    self._ready.append(done)

    def drop_stale(self, trainer_version: int) -> list[ScoredGroup]:
        """Remove (and mark dropped) every group a trainer at ``trainer_version`` may no longer use."""
        stale = [g for g in self._ready if trainer_version - g.version > self.max_staleness]
        stale += [g for g in self._incomplete.values() if trainer_version - g.version > self.max_staleness]
        for g in stale:
            self.ledger.mark_dropped([r.uid for r in g.rollouts])
        self._ready = [g for g in self._ready if g not in stale]
        self._incomplete = {k: g for k, g in self._incomplete.items() if g not in stale}
        return stale

    def take_batch(self, trainer_version: int) -> list[ScoredGroup] | None:
        """Drop stale groups, then the oldest ``groups_per_batch`` complete groups, or None if too few wait."""
        self.drop_stale(trainer_version)
        if len(self._ready) < self.groups_per_batch:
            return None
        self._ready.sort(key=lambda g: (g.version, g.group))
        batch, self._ready = self._ready[: self.groups_per_batch], self._ready[self.groups_per_batch :]
        return batch
