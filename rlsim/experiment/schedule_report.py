"""What the PPO step and the async schedule add to the contention results and report; nothing for GRPO.

``schedule_figures`` adds ``roles`` (rlsim.experiment.role_analysis) and ``async``
(rlsim.experiment.asynchronous.analysis) to a runtime's figures where its measurements have them, so recorded
rows are re-analysed the same way; ``schedule_conclusions`` and ``schedule_sections`` are the report's
hooks (report.py calls them), each empty when neither figure is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlsim.experiment.asynchronous.analysis import async_runtime_figures, async_table, async_words, is_async
from rlsim.experiment.capacity import Samples
from rlsim.experiment.role_analysis import has_roles, role_figures, role_table, role_words

UNITS = {
    "roles": "core_s_per_step: core-seconds of each role's process per together step; freed_went_to: per "
    "destination, this runtime minus the baseline in the same repeat (core-s per step; shorter_step = pool cores "
    "x the step time saved); destination: the largest whose 95% CI lies above 0",
    "async": "per async together run: rollouts and tokens trained per hour of the run, mean staleness (policy "
    "versions), idle fractions of the run's wall time, rollouts dropped as stale; *_change a paired fraction, "
    "*_diff a paired difference against the baseline; freed_went_to: outcomes improved, strongest first",
}
GLOSSARY = {
    "roles": [
        ("core-s per role", "CPU seconds of that role's actor process and its children per together step"),
        (
            "where the freed capacity went",
            "per destination, this runtime's core-s per step minus the baseline's in the same repeat; the "
            "freed scoring core-s equal their sum (roles + idle + shorter step + the rest) up to the residual",
        ),
    ],
    "async": [
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
    ],
}


def schedule_figures(
    per: Mapping[str, Mapping[str, Samples]], runtime: str, baseline: str, pool_cores: int
) -> dict[str, Any]:
    """``{"roles": ...}`` for a step with the reference or critic, ``{"async": ...}`` for an async run."""
    out: dict[str, Any] = {}
    if has_roles(per, runtime):
        out["roles"] = role_figures(per, runtime, baseline, pool_cores)
    if is_async(per, runtime):
        out["async"] = async_runtime_figures(per, runtime, baseline)
    return out


def schedule_units(runtimes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The ``units`` entries of the figures present."""
    return {k: v for k, v in UNITS.items() if any(k in f for f in runtimes.values())}


def schedule_conclusions(results: Mapping[str, Any]) -> list[str]:
    """Per compared runtime, where its freed capacity went (PPO roles; async outcomes)."""
    runtimes, baseline = results.get("runtimes", {}), results.get("baseline")
    out: list[str] = []
    if not isinstance(baseline, str) or baseline not in runtimes:
        return out
    for name, f in runtimes.items():
        if name == baseline:
            continue
        if "freed_went_to" in f.get("roles", {}):
            out.append(role_words(name, f, baseline))
        if "freed_went_to" in f.get("async", {}):
            out.append(async_words(name, f, baseline))
    return out


def schedule_sections(results: Mapping[str, Any]) -> list[str]:
    """The report's PPO-roles and async sections, with their glossary lines."""
    lines = role_table(results) + async_table(results)
    present = [k for k in GLOSSARY if any(k in f for f in results.get("runtimes", {}).values())]
    if present:
        lines += ["Terms of the sections above:", ""]
        lines += [f"- **{term}**: {text}" for k in present for term, text in GLOSSARY[k]] + [""]
    return lines
