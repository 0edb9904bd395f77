"""One GRPO step under a schedule, written against the loop's backend (``rlsim.loop.backends.protocol``: Ray or
in-process).

- ``sequential``: generate every rollout, then score them all (split across the scoring replicas),
  then update, then sync weights. The colocated default of most RLHF frameworks.
- ``overlapped``: the generator streams finished rollouts in micro-batches; each goes to a scoring
  replica at once (round robin) while generation goes on. Update and sync follow as before.

Every step checks that the rollouts generated, scored and trained are the same set (none lost,
none doubled), less the groups a dropped reward left out (``rlsim.loop.schedules.dropped``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rlsim.loop.backends.protocol import Backend
from rlsim.loop.schedules.dropped import drop_unrewarded
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Event, Rollout, RolloutRequest
from rlsim.schedule_kinds import SCHEDULES, ScheduleKind

Schedule = Literal["sequential", "overlapped"]  # the step-by-step entries of rlsim.schedule_kinds.SCHEDULES
Progress = Callable[[str, int, int], None]


@dataclass
class StepOutcome:
    """Everything one step produced. ``start``/``end``: wall-clock seconds around the whole step."""

    rollouts: list[Rollout]
    rewards: dict[int, float]
    train: dict[str, Any]
    sync: SyncResult
    events: list[Event]
    start: float
    end: float
    counts: dict[str, int] = field(default_factory=dict)
    phases: tuple[str, ...] = ()  # phases recorded beside the standard four (rlsim.loop.schedules.ppo)


def run_step(
    backend: Backend,
    schedule: Schedule,
    requests: Sequence[RolloutRequest],
    micro_batch: int,
    progress: Progress | None = None,
) -> StepOutcome:
    """Run one step; raises ``RuntimeError`` if any rollout is lost or doubled between stages."""
    note = progress or (lambda phase, done, total: None)
    start = time.time()
    if step_kind(schedule).streams:
        rollouts, rewards, events = _overlapped(backend, requests, micro_batch, note)
    else:
        rollouts, rewards, events = _sequential(backend, requests, note)
    counts = check_accounting(requests, rollouts, rewards)
    kept, kept_rewards = drop_unrewarded(rollouts, rewards, events)
    note("update", 0, 1)
    train, train_events = backend.result(backend.submit_train(kept, kept_rewards))
    check_trained(counts, train, len(rollouts) - len(kept))
    note("sync", 0, 1)
    sync, sync_events = backend.result(backend.submit_sync())
    end = time.time()
    return StepOutcome(rollouts, rewards, train, sync, events + train_events + sync_events, start, end, counts)


def check_trained(counts: dict[str, int], train: dict[str, Any], dropped: int) -> None:
    """``counts["trained"]`` (and ``dropped``, when any) from the update; ``RuntimeError`` unless generated ==
    trained + dropped."""
    counts["trained"] = int(train.get("sequences", -1))
    if dropped:
        counts["dropped"] = dropped
    if counts["trained"] + dropped != counts["generated"]:
        raise RuntimeError(
            f"trainer used {counts['trained']} rollouts of {counts['generated']} generated ({dropped} dropped)"
        )


def step_kind(schedule: str, what: str = "") -> ScheduleKind:
    """The entry of a step-by-step schedule (one batch per step); ``ValueError`` naming those for any other."""
    kind = SCHEDULES.get(schedule)
    if kind is None or kind.pipelined:
        valid = ", ".join(k for k, s in SCHEDULES.items() if not s.pipelined)
        raise ValueError(f"unknown schedule {schedule!r}{what}; valid: {valid}")
    return kind


def _sequential(
    backend: Backend, requests: Sequence[RolloutRequest], note: Progress
) -> tuple[list[Rollout], dict[int, float], list[Event]]:
    note("generate", 0, len(requests))
    rollouts, events = backend.result(backend.submit_generate(requests))
    note("score", 0, len(rollouts))
    parts = split_evenly(rollouts, backend.num_scorers)
    handles = [backend.submit_score(i, part, i) for i, part in enumerate(parts) if part]
    rewards: dict[int, float] = {}
    for scored, ev in backend.results(handles):
        _merge(rewards, scored)
        events += ev
    note("score", len(rewards), len(rollouts))
    return rollouts, rewards, events


def _overlapped(
    backend: Backend, requests: Sequence[RolloutRequest], micro_batch: int, note: Progress
) -> tuple[list[Rollout], dict[int, float], list[Event]]:
    rollouts: list[Rollout] = []
    events: list[Event] = []
    handles = []
    for k, (batch, ev) in enumerate(backend.stream(requests, micro_batch)):
        rollouts += batch
        events.append(ev)
        handles.append(backend.submit_score(None, batch, k))
        note("generate", len(rollouts), len(requests))
    rewards: dict[int, float] = {}
    for scored, evs in backend.results(handles):
        _merge(rewards, scored)
        events += evs
    note("score", len(rewards), len(rollouts))
    return rollouts, rewards, events


def _merge(into: dict[int, float], scored: dict[int, float]) -> None:
    doubled = set(into) & set(scored)
    if doubled:
        raise RuntimeError(f"rollouts {sorted(doubled)[:5]} were scored twice")
    into.update(scored)


def split_evenly(rollouts: list[Rollout], parts: int) -> list[list[Rollout]]:
    """``parts`` contiguous slices whose sizes differ by at most one."""
    n = len(rollouts)
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [rollouts[bounds[i] : bounds[i + 1]] for i in range(parts)]


def check_accounting(
    requests: Sequence[RolloutRequest], rollouts: Sequence[Rollout], rewards: dict[int, float]
) -> dict[str, int]:
    """Counts per stage; raises ``RuntimeError`` unless requested == generated == scored as sets of uids."""
    asked = [r.uid for r in requests]
    made = [r.uid for r in rollouts]
    if len(set(made)) != len(made):
        raise RuntimeError(f"{len(made) - len(set(made))} rollouts were generated twice")
    if set(made) != set(asked):
        lost = sorted(set(asked) - set(made))[:5]
        raise RuntimeError(f"{len(set(asked) - set(made))} requests produced no rollout (first uids {lost})")
    if set(rewards) != set(made):
        lost = sorted(set(made) - set(rewards))[:5]
        raise RuntimeError(f"{len(set(made) - set(rewards))} rollouts were not scored (first uids {lost})")
    for r, req in zip(sorted(rollouts, key=lambda x: x.uid), sorted(requests, key=lambda x: x.uid), strict=True):
        if len(r.response_ids) != req.response_tokens:
            raise RuntimeError(
                f"rollout {r.uid} has {len(r.response_ids)} response tokens, {req.response_tokens} were asked for"
            )
    return {"requested": len(asked), "generated": len(made), "scored": len(rewards)}
