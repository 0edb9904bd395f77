"""Per-step records from the event timeline: time per phase, idle time, busy time per actor, overhead.

Phases overlap in the ``overlapped`` schedule, so each phase's time is the *union* of its events'
intervals (wall time during which that phase was running on some actor), not their sum. ``idle`` is
the step time covered by no event at all: Ray calls, object transfers, the driver's own logic.
That is the orchestration overhead; ``overhead_fraction`` = idle / step time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from rlsim.rollout.types import Event
from rlsim.run_results import StepRecord

PHASES = ("generate", "score", "update", "sync")
# A step with experience roles splits the update: its ``update`` is the union of these events.
UPDATE_PARTS = ("update", "advantages", "update_actor", "update_critic")


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length (seconds) covered by the intervals, overlaps counted once."""
    total, cur_start, cur_end = 0.0, 0.0, None
    for start, end in sorted((s, e) for s, e in intervals if e > s):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def _clipped(events: Sequence[Event], start: float, end: float) -> list[tuple[float, float]]:
    return [(max(e.start, start), min(e.end, end)) for e in events]


def breakdown(events: Sequence[Event], start: float, end: float, extra: Sequence[str] = ()) -> dict[str, float]:
    """Seconds per phase (union of its events), ``idle`` (covered by none) and ``total``, within [start, end].
    ``extra``: further phases to report (``rlsim.loop.schedules.ppo.EXPERIENCE_PHASES``); ``update`` then
    covers every part of the update (``UPDATE_PARTS``)."""
    out = {p: union_length(_clipped([e for e in events if e.phase == p], start, end)) for p in PHASES}
    if extra:
        out["update"] = union_length(_clipped([e for e in events if e.phase in UPDATE_PARTS], start, end))
        out.update({p: union_length(_clipped([e for e in events if e.phase == p], start, end)) for p in extra})
    busy = union_length(_clipped(events, start, end))
    out["idle"] = max(0.0, (end - start) - busy)
    out["total"] = end - start
    return out


def busy_by_actor(events: Sequence[Event], start: float, end: float) -> dict[str, float]:
    """Seconds each actor spent working within [start, end] (its events' union)."""
    actors = sorted({e.actor for e in events})
    return {a: union_length(_clipped([e for e in events if e.actor == a], start, end)) for a in actors}


def busiest_actor_gap(events: Sequence[Event], start: float, end: float) -> float:
    """Step time minus the busiest actor's busy time, as a fraction of step time.

    With stages that depend on each other (generate -> score -> update -> sync) no single actor is
    busy the whole step, so this counts the other stages' work too; it is reported next to
    ``overhead_fraction`` for comparison, not as the overhead.
    """
    busy = busy_by_actor(events, start, end)
    total = end - start
    return (total - max(busy.values(), default=0.0)) / total if total > 0 else 0.0


def gpu_seconds(events: Sequence[Event], start: float, end: float) -> dict[str, float]:
    """GPU-seconds per actor that holds a GPU share: its busy time x its share (an estimate, not a
    hardware counter: a busy actor is assumed to keep its share of the GPU occupied)."""
    share = {e.actor: e.gpu for e in events if e.gpu > 0}
    busy = busy_by_actor([e for e in events if e.actor in share], start, end)
    return {a: busy[a] * share[a] for a in share}


def timeline_rows(step: int, events: Sequence[Event], start: float) -> list[dict[str, Any]]:
    """Events as JSON rows with times relative to the step start (seconds)."""
    rows = []
    for e in sorted(events, key=lambda e: (e.start, e.actor)):
        row = e.as_dict()
        row.update(step=step, start=round(e.start - start, 6), end=round(e.end - start, 6))
        rows.append(row)
    return rows


def step_record(
    step: int,
    schedule: str,
    outcome: Any,
    cpu_s: dict[str, float],
    tokens: dict[str, int],
) -> StepRecord:
    """The ``results.json`` entry of one step (``rlsim.run_results.StepRecord``)."""
    times = breakdown(outcome.events, outcome.start, outcome.end, outcome.phases)
    counted = ("generated", "scored", "referenced", "valued", "trained", "dropped")
    return StepRecord(
        step=step,
        schedule=schedule,
        time_s={k: round(v, 6) for k, v in times.items()},
        rollouts={k: outcome.counts[k] for k in counted if k in outcome.counts},
        cpu_s={k: round(v, 4) for k, v in cpu_s.items()},
        busy_s={k: round(v, 6) for k, v in busy_by_actor(outcome.events, outcome.start, outcome.end).items()},
        tokens=tokens,
        gpu_s={k: round(v, 6) for k, v in gpu_seconds(outcome.events, outcome.start, outcome.end).items()},
        overhead_fraction=round(times["idle"] / times["total"], 6) if times["total"] > 0 else 0.0,
        busiest_actor_gap_fraction=round(busiest_actor_gap(outcome.events, outcome.start, outcome.end), 6),
        sync={"method": outcome.sync.method, "seconds": round(outcome.sync.seconds, 6), "detail": outcome.sync.detail},
        train=outcome.train,
        reward_outcomes=reward_outcomes(outcome.events),
    )


def reward_outcomes(events: Sequence[Event]) -> dict[str, int] | None:
    """The step's scoring calls that ended otherwise than scored, summed over score events (None: none counted)."""
    total: Counter[str] = Counter()
    for e in events:
        if e.phase == "score":
            total.update(e.outcomes)
    return dict(sorted(total.items())) if total else None


def overall_overhead(steps: Sequence[StepRecord]) -> float:
    """Idle time over step time, summed over steps (so long steps weigh more)."""
    idle = sum(s.time_s.idle for s in steps)
    total = sum(s.time_s.total for s in steps)
    return idle / total if total > 0 else 0.0
