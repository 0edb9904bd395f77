"""When to stop repeating: a fixed count, or a precision target within a time budget.

The precision is that of the headline figure, each runtime's freed core-seconds against the baseline
(paired within a repeat): the half-width of its 95 % t-interval as a share of ``|mean|``. A runtime
whose effect is near zero could never reach a share of its mean, so the target half-width is floored
at ``EFFECT_FLOOR`` of the baseline's scoring cost: ``target_ci x max(|mean|, 0.05 x baseline cost)``.

After every repeat the repeats each runtime needs are projected from its current spread
(``repeats_for_half_width``: the fewest n with ``t(n-1) sd / sqrt(n) <= target``) and, with the mean
repeat duration so far, the time to get there. ``run_repeats`` drives the loop through two callables
(run one repeat; measure the precision), so the stopping logic runs and is tested without Ray.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlsim.experiment.capacity import capacity_samples, per_repeat, values
from rlsim.metrics.stats import mean_ci, repeats_for_half_width

MIN_REPEATS_FOR_TARGET = 3  # two repeats give too rough an sd to call a target met
MIN_REPEATS = 2  # no interval below two: not even the budget stops earlier
EFFECT_FLOOR = 0.05  # share of the baseline's scoring core-s below which an effect counts as ~0


@dataclass(frozen=True)
class StopRule:
    """``repeats``: run exactly this many (None: until ``target_ci`` is met); ``target_ci``: CI
    half-width as a share of |mean| (None: no target, precision only reported); ``max_minutes``:
    never start a repeat that would, at the mean repeat duration so far, end past this."""

    repeats: int | None
    target_ci: float | None
    max_minutes: float | None


@dataclass(frozen=True)
class Precision:
    """One runtime's freed core-s after ``n`` repeats (core-seconds; fractions of |mean|)."""

    n: int
    mean: float
    sd: float
    half_width: float
    target_half_width: float | None
    repeats_needed: int | None

    @property
    def met(self) -> bool | None:
        return None if self.target_half_width is None else self.half_width <= self.target_half_width

    @property
    def half_width_fraction(self) -> float | None:
        return self.half_width / abs(self.mean) if self.mean != 0 else None

    @property
    def further_repeats(self) -> int | None:
        return None if self.repeats_needed is None else max(0, self.repeats_needed - self.n)

    def as_dict(self) -> dict[str, Any]:
        r = lambda x: None if x is None or not math.isfinite(x) else round(x, 6)  # noqa: E731
        return {
            "n": self.n,
            "mean": r(self.mean),
            "half_width": r(self.half_width),
            "half_width_fraction": r(self.half_width_fraction),
            "target_half_width": r(self.target_half_width),
            "met": self.met,
            "repeats_needed": self.repeats_needed,
            "further_repeats": self.further_repeats,
        }


def precision_of(samples: Sequence[float], baseline_cost: float, target_ci: float | None) -> Precision | None:
    """Precision of one runtime's per-repeat freed core-s; None below two repeats."""
    if len(samples) < 2:
        return None
    e = mean_ci(samples)
    sd = statistics.stdev(samples)
    target = None if target_ci is None else target_ci * max(abs(e.mean), EFFECT_FLOOR * abs(baseline_cost))
    needed = None if not target else repeats_for_half_width(sd, target)
    return Precision(e.n, e.mean, sd, e.half_width, target, needed)


def precision_from_rows(
    rows: Sequence[Mapping[str, Any]], runtimes: Sequence[str], baseline: str, target_ci: float | None
) -> dict[str, Precision]:
    """Every compared runtime's precision from the measurement rows so far (the baseline excluded)."""
    per = per_repeat(rows)
    base_cost = values(per, baseline, "together.score_core_s")
    cost = statistics.fmean(base_cost) if base_cost else 0.0
    out = {}
    for rt in runtimes:
        if rt == baseline or rt not in per:
            continue
        p = precision_of(capacity_samples(per, rt, baseline, 1).get("freed_core_s", []), cost, target_ci)
        if p is not None:
            out[rt] = p
    return out


def stop_reason(
    rule: StopRule, done: int, durations: Sequence[float], elapsed_s: float, precision: Mapping[str, Precision]
) -> str | None:
    """None: run another repeat. Else why to stop: ``"repeats"`` (the fixed count is done),
    ``"target"`` (every compared runtime met it) or ``"minutes"`` (the next repeat would end past
    the budget)."""
    if rule.repeats is not None and done >= rule.repeats:
        return "repeats"
    if (
        rule.repeats is None
        and rule.target_ci is not None
        and done >= MIN_REPEATS_FOR_TARGET
        and all(p.met for p in precision.values())
    ):
        return "target"
    if rule.max_minutes is not None and done >= MIN_REPEATS and durations:
        if elapsed_s + statistics.fmean(durations) > rule.max_minutes * 60.0:
            return "minutes"
    return None


def stopped_by(reason: str | None, p: Precision | None) -> str | None:
    """Per runtime: ``"target"`` when it met its target, else ``"budget"`` (repeats or minutes); None
    while the experiment still runs."""
    if reason is None:
        return None
    return "target" if p is not None and p.met else "budget"


def projection(precision: Mapping[str, Precision], durations: Sequence[float], target_ci: float | None) -> str:
    """The progress line's suffix: current half-widths and, with a target, the time to reach it."""
    if not precision:
        return ""
    widths = " ".join(f"{rt} ±{_pct(p.half_width_fraction)}" for rt, p in precision.items())
    if target_ci is None:
        return f" | freed core-s CI {widths}"
    further = max((p.further_repeats or 0) for p in precision.values())
    if further == 0:
        return f" | freed core-s CI {widths} (target {target_ci:.0%}: met)"
    minutes = further * statistics.fmean(durations) / 60.0 if durations else math.nan
    return (
        f" | freed core-s CI {widths} (target {target_ci:.0%}: ~{further} more repeat{'' if further == 1 else 's'}, "
        f"~{minutes:.0f} min)"
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


@dataclass
class LoopOutcome:
    repeats_done: int
    reason: str | None
    durations: list[float]
    precision: dict[str, Precision]


def run_repeats(
    rule: StopRule,
    run_repeat: Callable[[int], None],
    measure: Callable[[], dict[str, Precision]],
    clock: Callable[[], float],
    on_repeat: Callable[[LoopOutcome], None] = lambda _: None,
) -> LoopOutcome:
    """Run repeats 0, 1, ... until ``stop_reason`` says stop; ``measure`` is called after each one
    and ``on_repeat`` gets the state (for the progress line). ``clock``: seconds, monotonic."""
    start = clock()
    state = LoopOutcome(0, None, [], {})
    while True:
        state.reason = stop_reason(rule, state.repeats_done, state.durations, clock() - start, state.precision)
        if state.reason is not None:
            return state
        t0 = clock()
        run_repeat(state.repeats_done)
        state.durations.append(clock() - t0)
        state.repeats_done += 1
        state.precision = measure()
        on_repeat(state)
