"""What an async run adds to ``results.json`` and ``report.md``: the top-level ``async`` and
``rollouts_total`` records, each update's step record, and a Gantt chart of the whole run.

Idle fractions follow verl's ``trainer/idle_ratio`` and ``rollouter/idle_ratio``: the share of the run's
wall time (first generate call to the end of the last step so far) in which that worker ran nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rlsim.loop.outputs.records import _clipped, step_record, timeline_rows, union_length
from rlsim.loop.schedules.asynchronous.pipeline import AsyncPipeline, AsyncStepOutcome
from rlsim.loop.schedules.asynchronous.staleness import histogram_of
from rlsim.run_results import AsyncRecord, RolloutTotals, RunResults, StepRecord


def async_step_record(
    step: int, outcome: AsyncStepOutcome, cpu_s: dict[str, float], run_start: float
) -> tuple[StepRecord, list[dict[str, Any]]]:
    """The step's ``results.json`` record and its timeline rows; each row also carries ``run_start``
    (seconds from the run's start to this step's), so the whole run can be drawn on one time axis."""
    tokens = {
        "prompt": sum(len(r.prompt_ids) for r in outcome.rollouts),
        "generated": sum(len(r.response_ids) for r in outcome.rollouts),
    }
    record = step_record(step, "async", outcome, cpu_s, tokens)
    record.policy_version = outcome.version
    record.staleness = outcome.staleness
    record.dropped_stale = outcome.dropped_stale
    spans = [r.version_span for r in outcome.rollouts if r.version_span is not None]
    if spans:
        record.version_span = histogram_of(spans)
    if record.sync is not None and outcome.sync_latency_s is not None:
        record.sync.latency_s = round(outcome.sync_latency_s, 6)
    rows = timeline_rows(step, outcome.events, outcome.start)
    for row in rows:
        row["run_start"] = round(outcome.start - run_start, 6)
    return record, rows


def async_summary(
    pipeline: AsyncPipeline, now: float, before: tuple[AsyncRecord, RolloutTotals] | None = None
) -> dict[str, Any]:
    """``{"async_": AsyncRecord, "rollouts_total": RolloutTotals}`` for the run up to ``now`` (seconds);
    ``before``: the records of the run a ``--resume`` continues, merged in (``merge_async``)."""
    start = pipeline.start if pipeline.start is not None else now
    wall = max(now - start, 1e-9)
    events = pipeline.events

    def idle(actor_prefix: str) -> float:
        mine = [e for e in events if e.actor.startswith(actor_prefix)]
        return round(1.0 - union_length(_clipped(mine, start, now)) / wall, 6)

    counts, hist, spans, tokens = _as_recorded(pipeline)
    trained = counts["trained"]
    pause = sum(e.duration for e in events if e.actor == "rollout" and e.phase == "sync")
    record = AsyncRecord(
        max_staleness=pipeline.settings.max_staleness,
        staleness_histogram=hist,
        trainer_idle_fraction=idle("trainer"),
        rollout_idle_fraction=idle("rollout"),
        rollouts_trained_per_hour=round(trained / wall * 3600, 3),
        tokens_trained_per_hour=round(tokens / wall * 3600, 1),
        wall_s=round(wall, 4),
        weight_sync_pause_s=round(pause, 4),
        queue_size=pipeline.settings.queue_size,
        queue_length=list(pipeline.queue_log),
        partial_rollouts=pipeline.settings.partial_rollouts,
        version_span_histogram=spans if pipeline.settings.partial_rollouts else None,
    )
    totals = RolloutTotals(**counts)
    if before is not None:
        record, totals = merge_async(before[0], record), merge_totals(before[1], totals)
    return {"async_": record, "rollouts_total": totals}


def _as_recorded(pipeline: AsyncPipeline) -> tuple[dict[str, int], dict[str, int], dict[str, int], int]:
    """Rollout totals, staleness and version-span histograms, and trained response tokens as the step
    records have them.

    An update still running has trained nothing yet as far as the records go (a run stopped now never
    records it), so its rollouts count as unfinished; the ledger marks them trained when handed over."""
    pending = pipeline.unrecorded_trained()
    counts = pipeline.ledger.totals()
    counts["trained"] -= len(pending)
    counts["unfinished_at_end"] += len(pending)
    ledger = pipeline.ledger
    hist = _less(ledger.histogram(), (ledger.trained[r.uid] for r in pending))
    spans = _less(ledger.span_histogram(), (ledger.spans[r.uid] for r in pending if r.uid in ledger.spans))
    tokens = pipeline.trained_tokens - sum(len(r.response_ids) for r in pending)
    return counts, hist, spans, tokens


def _less(hist: dict[str, int], values: Iterable[int]) -> dict[str, int]:
    """``hist`` without one count of each of ``values``; empty bins left out."""
    out = Counter(hist)
    out.subtract(str(v) for v in values)
    return {k: n for k, n in sorted(out.items(), key=lambda kv: int(kv[0])) if n > 0}


def _add(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    if a is None and b is None:
        return None
    a, b = a or {}, b or {}
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted({*a, *b}, key=int)}


def merge_async(first: AsyncRecord, then: AsyncRecord) -> AsyncRecord:
    """One record for a run stopped after ``first`` and resumed for ``then``: counts add up, fractions
    and rates are weighted by each part's wall time (the time between the two processes is not counted),
    and the second part's queue lengths are shifted to follow the first's."""
    w1, w2 = first.wall_s or 0.0, then.wall_s or 0.0
    wall = max(w1 + w2, 1e-9)

    def weighted(a: float | None, b: float | None, digits: int) -> float:
        return round(((a or 0.0) * w1 + (b or 0.0) * w2) / wall, digits)

    return then.model_copy(
        update={
            "staleness_histogram": _add(first.staleness_histogram, then.staleness_histogram),
            "version_span_histogram": _add(first.version_span_histogram, then.version_span_histogram),
            "trainer_idle_fraction": weighted(first.trainer_idle_fraction, then.trainer_idle_fraction, 6),
            "rollout_idle_fraction": weighted(first.rollout_idle_fraction, then.rollout_idle_fraction, 6),
            "rollouts_trained_per_hour": weighted(first.rollouts_trained_per_hour, then.rollouts_trained_per_hour, 3),
            "tokens_trained_per_hour": weighted(first.tokens_trained_per_hour, then.tokens_trained_per_hour, 1),
            "wall_s": round(w1 + w2, 4),
            "weight_sync_pause_s": round((first.weight_sync_pause_s or 0.0) + (then.weight_sync_pause_s or 0.0), 4),
            "queue_length": [*first.queue_length, *[(round(t + w1, 4), n) for t, n in then.queue_length]],
        }
    )


def merge_totals(first: RolloutTotals, then: RolloutTotals) -> RolloutTotals:
    """Every rollout of both parts; the stopped part's queue is in its ``unfinished_at_end``."""
    keys = ("generated", "trained", "dropped_stale", "dropped_reward", "unfinished_at_end")
    return RolloutTotals(**{k: getattr(first, k) + getattr(then, k) for k in keys})


def async_markdown(results: RunResults) -> list[str]:
    """The async run's lines in ``report.md``: staleness, idle fractions, throughput, every rollout's fate."""
    a, t = results.async_, results.rollouts_total
    if a is None or t is None:
        return []
    hist = ", ".join(f"{n} at staleness {k}" for k, n in a.staleness_histogram.items()) or "none"
    partial = ""
    if a.partial_rollouts:
        spans = a.version_span_histogram or {}
        several = sum(n for k, n in spans.items() if int(k) > 0)
        partial = (
            f" Partial rollouts on (weights may load between engine steps of a generate call): {several} trained "
            "rollouts were sampled by two or more policy versions (staleness counts each at its oldest)."
        )
    return [
        "",
        f"Async (max_staleness {a.max_staleness}, queue {a.queue_size} rollouts): trained rollouts {hist}; "
        f"{a.rollouts_trained_per_hour:.0f} rollouts trained per hour; trainer idle "
        f"{100 * a.trainer_idle_fraction:.1f}%, rollout worker idle {100 * a.rollout_idle_fraction:.1f}% of "
        f"{a.wall_s or 0:.1f} s; the engine paused {a.weight_sync_pause_s or 0:.2f} s for weight loads.{partial}",
        f"Rollouts: {t.generated} generated = {t.trained} trained + {t.dropped_stale} dropped as stale + "
        + (f"{t.dropped_reward} dropped with their rewards (on_timeout: drop) + " if t.dropped_reward else "")
        + f"{t.unfinished_at_end} unfinished at the end. Per-step times count events by the step in which they "
        "finished; CPU seconds per step are not probed under async.",
    ]
