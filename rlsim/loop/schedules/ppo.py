"""One step with the experience roles (PPO's critic, the reference for the KL), under either schedule.

- ``sequential``: generate every rollout; then score (split across the scoring replicas), the
  reference's log-probs and the critic's values, all three at once on their actors; then the
  advantages (on the trainer); then the actor and critic updates (at once, or taking turns when
  colocated); then the weight sync.
- ``overlapped``: every micro-batch of finished rollouts goes to a scorer (round robin), the
  reference and the critic at once while generation goes on; advantages, updates and sync follow.

Every step checks that the rollouts generated, scored, referenced, valued and trained are the same
set (none lost, none doubled). GRPO without a KL never comes here (``rlsim.loop.schedules.step``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from rlsim.loop.backends.protocol import Backend
from rlsim.loop.schedules.dropped import drop_unrewarded
from rlsim.loop.schedules.step import (
    Progress,
    Schedule,
    StepOutcome,
    check_accounting,
    check_trained,
    split_evenly,
    step_kind,
)
from rlsim.rollout.types import Event, Rollout, RolloutRequest

# The time_s keys a step with experience roles adds (``rlsim.loop.outputs.records``), in the order they run.
EXPERIENCE_PHASES = ("reference", "values", "advantages", "update_actor", "update_critic")


class _InFlight:
    """The step's pending calls: scoring, reference and values handles, in submission order."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.score: list[Any] = []
        self.reference: list[Any] = []
        self.values: list[Any] = []

    def send(self, rollouts: list[Rollout], batch: int, split: bool) -> None:
        """Scoring of ``rollouts`` (split across every replica, or as one call to the replica the backend's
        router picks), and the reference and the critic on the same rollouts, all submitted before anything is
        awaited."""
        b = self.backend
        if split:
            parts = split_evenly(rollouts, b.num_scorers)
            self.score += [b.submit_score(i, part, i) for i, part in enumerate(parts) if part]
        else:
            self.score.append(b.submit_score(None, rollouts, batch))
        if b.uses_reference:
            self.reference.append(b.submit_reference(rollouts, batch))
        if b.uses_critic:
            self.values.append(b.submit_values(rollouts, batch))


def run_ppo_step(
    backend: Backend,
    schedule: Schedule,
    requests: Sequence[RolloutRequest],
    micro_batch: int,
    progress: Progress | None = None,
) -> StepOutcome:
    """Run one step; raises ``RuntimeError`` if any rollout is lost or doubled between stages."""
    note = progress or (lambda phase, done, total: None)
    start = time.time()
    flight = _InFlight(backend)
    if step_kind(schedule, " for a step with a reference or critic").streams:
        rollouts, events = [], []
        for k, (batch, made) in enumerate(backend.stream(requests, micro_batch)):
            rollouts += batch
            events.append(made)
            flight.send(batch, k, split=False)
            note("generate", len(rollouts), len(requests))
    else:
        note("generate", 0, len(requests))
        rollouts, events = backend.result(backend.submit_generate(requests))
        note("score", 0, len(rollouts))
        flight.send(rollouts, 0, split=True)
    rewards = _joined(backend.results(flight.score), events, "scored")
    note("score", len(rewards), len(rollouts))
    counts = check_accounting(requests, rollouts, rewards)
    ref = values = None
    if backend.uses_reference:
        ref = _joined(backend.results(flight.reference), events, "referenced")
        counts["referenced"] = _count(rollouts, ref, "referenced")
    if backend.uses_critic:
        values = _joined(backend.results(flight.values), events, "valued")
        counts["valued"] = _count(rollouts, values, "valued")
    kept, kept_rewards = drop_unrewarded(rollouts, rewards, events)
    if len(kept) < len(rollouts):
        ref, values = _only(kept, ref), _only(kept, values)
    note("advantages", 0, 1)
    returns, ev = backend.result(backend.submit_experience(kept, kept_rewards, ref, values))
    events += ev
    note("update", 0, 1)
    train, ev = backend.result(backend.submit_update(kept, returns, values))
    events += ev
    check_trained(counts, train, len(rollouts) - len(kept))
    note("sync", 0, 1)
    sync, ev = backend.result(backend.submit_sync())
    return StepOutcome(
        rollouts, rewards, train, sync, events + ev, start, time.time(), counts, phases=EXPERIENCE_PHASES
    )


def _only(kept: Sequence[Rollout], per_uid: dict[int, Any] | None) -> dict[int, Any] | None:
    return None if per_uid is None else {r.uid: per_uid[r.uid] for r in kept}


def _joined(results: list[tuple[dict[int, Any], list[Event]]], events: list[Event], what: str) -> dict[int, Any]:
    """The per-uid answers of several calls in one dict (their events go to ``events``); raises
    ``RuntimeError`` if a uid comes back twice."""
    out: dict[int, Any] = {}
    for part, ev in results:
        doubled = set(out) & set(part)
        if doubled:
            raise RuntimeError(f"rollouts {sorted(doubled)[:5]} were {what} twice")
        out.update(part)
        events += ev
    return out


def _count(rollouts: Sequence[Rollout], per_uid: Mapping[int, Any], what: str) -> int:
    """``len(per_uid)`` after checking it covers exactly the generated uids, one value per response token."""
    made = {r.uid for r in rollouts}
    if set(per_uid) != made:
        lost, extra = sorted(made - set(per_uid))[:5], sorted(set(per_uid) - made)[:5]
        raise RuntimeError(
            f"{len(made - set(per_uid))} rollouts were not {what} (first uids {lost}); unknown uids {extra}"
        )
    bad = [r.uid for r in rollouts if len(per_uid[r.uid]) != len(r.response_ids)]
    if bad:
        raise RuntimeError(
            f"rollout {bad[0]} was {what} with {len(per_uid[bad[0]])} values for its "
            f"{len(next(r for r in rollouts if r.uid == bad[0]).response_ids)} response tokens"
        )
    return len(per_uid)
