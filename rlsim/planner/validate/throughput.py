"""Predicted vs measured for an ``async`` run: rollouts trained per hour, not step time.

An async step is the time between two weight syncs, and generation for later steps runs inside it, so
one step's time says little; the throughput is what the schedule is for. Both sides are taken over the
same loop steps (the first ``warmup_steps`` dropped, as for the other schedules, which also leaves out
the pipeline's fill): ``rate = rollouts trained in those steps x 3600 / their summed step time``, and
``error = predicted rate / measured rate - 1`` (+0.05: the planner predicts 5 % more rollouts per hour
than the loop trained). The whole run's figures (results.json's ``async`` block: fill and warm-up
included, staleness, idle fractions) are put beside them for reading, not scored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlsim.planner.measure.loop_results import LoopSteps
from rlsim.planner.sim.evaluate import Evaluation
from rlsim.run_results import RunResults

METRIC = "rollouts_trained_per_hour"
PHASES = ("generate", "score", "update", "sync", "idle")


def with_trained_counts(steps: LoopSteps, results: RunResults) -> LoopSteps:
    """``steps`` (parsed from ``results``) counting the rollouts each step trained, not generated: an async
    step generates for later steps while it trains an earlier batch."""
    trained = {s.step: s.rollouts.trained for s in results.steps}
    counts = [trained.get(n) for n in steps.numbers]
    if any(c is None for c in counts):
        raise ValueError(f"{steps.path}: an async step record lacks rollouts.trained")
    return dataclasses.replace(steps, rollouts=np.array(counts, dtype=float))


def async_validation_entry(
    name: str, predicted: Evaluation, measured: LoopSteps, predicted_numbers: Sequence[int] | None = None
) -> dict[str, Any]:
    """One async configuration (``measured`` from ``with_trained_counts``); ``predicted_numbers``: the loop
    step number of each predicted step (None: 1, 2, ...)."""
    numbers = list(predicted_numbers) if predicted_numbers is not None else range(1, len(predicted.steps) + 1)
    at = {n: s for n, s in zip(numbers, predicted.steps, strict=True)}
    steps = [at[n] for n in measured.numbers]
    predicted_rate = sum(s.rollouts for s in steps) * 3600.0 / sum(s.time_s["total"] for s in steps)
    measured_rate = float(measured.rollouts.sum()) * 3600.0 / float(measured.time_s["total"].sum())
    predicted_totals = [s.time_s["total"] for s in steps]
    return {
        "name": name,
        "metric": METRIC,
        "error": predicted_rate / measured_rate - 1.0,
        "predicted_rollouts_per_hour": predicted_rate,
        "measured_rollouts_per_hour": measured_rate,
        "predicted_step_s": float(np.median(predicted_totals)),
        "measured_step_s": float(np.median(measured.time_s["total"])),
        "rollouts_per_step": float(np.median(measured.rollouts)),
        "phases_s": {
            p: {
                "predicted": float(np.median([s.time_s[p] for s in steps])),
                "measured": float(np.median(measured.time_s[p])),
            }
            for p in PHASES
        },
        "steps": measured.numbers,
        "predicted_steps_s": predicted_totals,
        "measured_steps_s": [float(x) for x in measured.time_s["total"]],
        "bottleneck": predicted.bottleneck,
    }


def async_run_figures(predicted: Evaluation, results: RunResults) -> dict[str, Any]:
    """The whole run, predicted and measured, as results.json reports it (read beside the entry, not scored)."""
    mine = predicted.extra.get("async", {})
    theirs = results.async_
    keys = ("rollouts_trained_per_hour", "staleness_histogram", "trainer_idle_fraction", "rollout_idle_fraction")
    return {
        "whole_run": {
            k: {"predicted": mine.get(k), "measured": getattr(theirs, k) if theirs is not None else None} for k in keys
        },
        "rollouts_total": {
            "predicted": mine.get("rollouts_total"),
            "measured": results.rollouts_total.model_dump() if results.rollouts_total is not None else None,
        },
    }
