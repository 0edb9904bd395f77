"""Under ``schedule: async``: per runtime, rollouts trained per hour, mean staleness and the trainer's
idle fraction with CIs, each against the baseline paired within a repeat, and where the freed capacity
went.

In an async pipeline a faster scorer shortens no step; what it frees can show as three outcomes
(issue 13): more rollouts trained per hour, fresher rollouts (lower mean staleness: the trainer waits
less for scored groups, so it takes them sooner after generation) or less trainer idle time. Each
outcome is a paired comparison with the baseline (``analysis``'s statistics: the geometric mean of
per-repeat ratios for rollouts per hour, per-repeat differences for staleness and idle fractions, which
can be 0); the words name those whose 95% interval lies on the better side, strongest first, from
at least ``MIN_REPEATS_TO_NAME`` repeats (as for PPO's roles).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlsim.experiment.analysis import PAIRED_DIFF, estimate, paired_change, paired_compare
from rlsim.experiment.capacity import Samples, paired, values
from rlsim.experiment.formatting import ReportSection, fmt_est
from rlsim.experiment.role_analysis import MIN_REPEATS_TO_NAME

# Per-repeat figures of the async together run (rlsim.experiment.asynchronous.condition.async_figures).
ASYNC_FIGURES = (
    "rollouts_trained_per_hour",
    "tokens_trained_per_hour",
    "mean_staleness",
    "trainer_idle_fraction",
    "rollout_idle_fraction",
    "dropped_stale",
)
# outcome -> (figure, +1 when more is better / -1 when less is better, how the report says it)
OUTCOMES = {
    "more_rollouts_per_hour": ("rollouts_trained_per_hour", +1, "more rollouts trained per hour"),
    "fresher_rollouts": ("mean_staleness", -1, "fresher rollouts (lower mean staleness)"),
    "less_trainer_idle": ("trainer_idle_fraction", -1, "less trainer idle time"),
}
DIFFERENCES = ("mean_staleness", "trainer_idle_fraction", "rollout_idle_fraction")

Per = Mapping[str, Mapping[str, Samples]]


def is_async(per: Per, runtime: str) -> bool:
    """Was ``runtime``'s together condition an async pipeline?"""
    return "together.rollouts_trained_per_hour" in per.get(runtime, {})


def async_runtime_figures(per: Per, runtime: str, baseline: str) -> dict[str, Any]:
    """``results.json``'s ``runtimes.<name>.async``: each of ``ASYNC_FIGURES`` (mean, 95% CI over
    repeats); against the baseline (not for the baseline itself) ``rollouts_trained_per_hour_change``
    (fraction), ``<figure>_diff`` for staleness and the idle fractions, ``significance`` and
    ``freed_went_to`` (the outcomes that improved, strongest first)."""
    out: dict[str, Any] = {name: estimate(values(per, runtime, f"together.{name}")) for name in ASYNC_FIGURES}
    if runtime == baseline:
        return out

    def pair(name: str) -> tuple[list[float], list[float]]:
        return paired(per, (runtime, f"together.{name}"), (baseline, f"together.{name}"))

    out["rollouts_trained_per_hour_change"] = paired_change(*pair("rollouts_trained_per_hour"))
    for name in DIFFERENCES:
        mine, base = pair(name)
        diffs = [m - b for m, b in zip(mine, base, strict=True)]
        out[f"{name}_diff"] = {**estimate(diffs), "method": PAIRED_DIFF} if diffs else estimate([])
    out["significance"] = {figure: paired_compare(*pair(figure)) for figure, _, _ in OUTCOMES.values()}
    out["freed_went_to"] = improved_outcomes(out)
    return out


def _effect(figures: Mapping[str, Any], figure: str) -> Mapping[str, Any]:
    return figures["rollouts_trained_per_hour_change" if figure == "rollouts_trained_per_hour" else f"{figure}_diff"]


def improved_outcomes(figures: Mapping[str, Any]) -> list[str]:
    """The outcomes whose paired 95% CI lies wholly on the better side of 0, strongest first (by
    |mean| over the CI's half-width); none from fewer than ``MIN_REPEATS_TO_NAME`` repeats."""
    found = []
    for outcome, (figure, better, _) in OUTCOMES.items():
        e = _effect(figures, figure)
        low, high = e.get("ci_low"), e.get("ci_high")
        if low is None or high is None or e.get("mean") is None or e.get("n", 0) < MIN_REPEATS_TO_NAME:
            continue
        if (better > 0 and low > 0) or (better < 0 and high < 0):
            half = (high - low) / 2
            found.append((abs(e["mean"]) / half if half > 0 else float("inf"), outcome))
    return [outcome for _, outcome in sorted(found, reverse=True)]


def async_words(name: str, figures: Mapping[str, Any], baseline: str) -> str:
    """One sentence: ``name``'s async outcomes against ``baseline`` and where its freed capacity went."""
    a = figures["async"]
    went, n = a["freed_went_to"], a["rollouts_trained_per_hour_change"].get("n", 0)
    if went:
        verdict = "The freed capacity went to " + " and ".join(OUTCOMES[o][2] for o in went) + " (paired 95% CI "
        verdict += "on the better side of 0)."
    elif n < MIN_REPEATS_TO_NAME:
        verdict = f"No outcome is named from {n} repeats (at least {MIN_REPEATS_TO_NAME} are needed)."
    else:
        verdict = (
            "None of more rollouts per hour, fresher rollouts or less trainer idle time is established (every "
            "paired 95% CI includes 0)."
        )
    return (
        f"Async, **{name}** vs {baseline}: scoring frees {fmt_est(figures['freed_core_s'], '.2f')} core-s per "
        f"update; rollouts trained per hour change {fmt_est(a['rollouts_trained_per_hour_change'], '+.1%')}, mean "
        f"staleness {fmt_est(a['mean_staleness_diff'], '+.2f')} policy versions, trainer idle "
        f"{fmt_est(a['trainer_idle_fraction_diff'], '+.1%')} of the run. {verdict}"
    )


def async_table(results: Mapping[str, Any]) -> list[str]:
    """The report's async section: the outcomes per runtime (mean, 95% CI over repeats)."""
    runtimes = {n: f["async"] for n, f in results["runtimes"].items() if "async" in f}
    if not runtimes:
        return []
    cols = [
        ("rollouts trained/h", "rollouts_trained_per_hour", ".0f"),
        ("mean staleness", "mean_staleness", ".2f"),
        ("trainer idle", "trainer_idle_fraction", ".0%"),
        ("rollout idle", "rollout_idle_fraction", ".0%"),
        ("dropped as stale", "dropped_stale", ".1f"),
        ("rollouts/h change", "rollouts_trained_per_hour_change", "+.1%"),
        ("staleness change", "mean_staleness_diff", "+.2f"),
        ("trainer idle change", "trainer_idle_fraction_diff", "+.1%"),
    ]
    lines = [
        "## Async pipeline per runtime",
        "",
        f"Each together run is an async pipeline of {results.get('async_updates')} updates; the time-boxed "
        "condition is not run (the pipeline's own rollouts trained per hour replace it), and step time and "
        "core-s figures above are per update. Changes are paired with the baseline in the same repeat.",
        "",
        "| runtime | " + " | ".join(c[0] for c in cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for name, a in runtimes.items():
        lines.append(f"| {name} | " + " | ".join(fmt_est(a.get(key), fmt) for _, key, fmt in cols) + " |")
    return lines + [""]


def _figures(per: Per, runtime: str, baseline: str, pool_cores: int) -> dict[str, Any]:
    return async_runtime_figures(per, runtime, baseline)  # per run, not per pool core


# The async schedule's section (its entry in rlsim.schedule_kinds names it as its ``reports``).
ASYNC_REPORT = ReportSection(
    key="async",
    units="per async together run: rollouts and tokens trained per hour of the run, mean staleness (policy "
    "versions), idle fractions of the run's wall time, rollouts dropped as stale; *_change a paired fraction, "
    "*_diff a paired difference against the baseline; freed_went_to: outcomes improved, strongest first",
    glossary=(
        (
            "rollouts trained per hour",
            "trained rollouts over the async run's wall time (first generate call to the last update's weight sync)",
        ),
        (
            "mean staleness",
            "policy versions between the weights that generated a trained rollout and the "
            "trainer's, averaged over trained rollouts",
        ),
        ("trainer idle", "share of the async run's wall time the trainer ran nothing (verl's trainer/idle_ratio)"),
    ),
    present=is_async,
    figures=_figures,
    words=async_words,
    table=async_table,
)
