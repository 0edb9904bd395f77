"""The experiment's PNGs (matplotlib, Agg backend), written atomically, from results.json values.

- ``pool_time.png``: pool core-seconds of a together step, stacked by activity, per runtime;
- ``step_vs_cost.png``: step time beside scoring core-seconds per runtime (mean, 95 % CI), so a step
  time that barely moves next to a scoring cost that drops is visible at a glance;
- ``generation.png``: generation tokens/s alone and together per runtime, and time-boxed rollouts/hour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlsim.io import atomic_write_bytes
from rlsim.metrics.plots import png_bytes, subplots

ACTIVITY_COLOURS = {
    "generate": "#4c72b0",
    "score": "#dd8452",
    "reference": "#64b5cd",
    "critic": "#ccb974",
    "update": "#55a868",
    "orchestration": "#8172b3",
    "other processes": "#937860",
    "kernel": "#da8bc3",
    "idle": "#dddddd",
}


def _mean(e: Mapping[str, Any] | None) -> float:
    return float(e["mean"]) if e and e.get("mean") is not None else 0.0


def _err(estimates: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """Asymmetric error bars (below, above) from each CI; 0 where a bound is missing."""
    lo = [max(0.0, _mean(e) - e["ci_low"]) if e.get("ci_low") is not None else 0.0 for e in estimates]
    hi = [max(0.0, e["ci_high"] - _mean(e)) if e.get("ci_high") is not None else 0.0 for e in estimates]
    return [lo, hi]


def pool_time_png(results: Mapping[str, Any]) -> bytes:
    runtimes = results["runtimes"]
    names = list(runtimes)
    fig, ax = subplots(max(6.0, 1.1 * len(names) + 3), 4.8, constrained=True)
    bottom = [0.0] * len(names)
    bars = runtimes[names[0]]["pool_core_s_per_step"]  # the reference and critic only where they ran
    for activity, colour in ACTIVITY_COLOURS.items():
        if activity not in bars:
            continue
        heights = [_mean(runtimes[n]["pool_core_s_per_step"].get(activity)) for n in names]
        ax.bar(names, heights, bottom=bottom, color=colour, label=activity, edgecolor="white", linewidth=0.5)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    cores = results.get("pool_cores", 1)
    pool = [cores * _mean(runtimes[n]["step_time_s"]) for n in names]
    ax.scatter(names, pool, marker="_", s=900, color="black", zorder=3, label="pool cores x step time")
    ax.set_ylabel("core-seconds per step (mean of repeats)")
    ax.set_title(f"Pool time per together step ({cores} cores)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return png_bytes(fig)


def step_vs_cost_png(results: Mapping[str, Any]) -> bytes:
    runtimes = results["runtimes"]
    names = list(runtimes)
    fig, (left, right) = subplots(max(8.0, 1.6 * len(names) + 4), 4.2, ncols=2, constrained=True)
    for ax, key, label, colour in (
        (left, "step_time_s", "step time (s)", "#4c72b0"),
        (right, "scoring_core_s", "scoring core-seconds per step", "#dd8452"),
    ):
        est = [runtimes[n][key] for n in names]
        ax.bar(names, [_mean(e) for e in est], yerr=_err(est), capsize=4, color=colour)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.set_title(label + " (95% CI)")
        if key == "scoring_core_s":  # the baseline's line makes the freed part obvious
            ax.axhline(_mean(runtimes.get(results["baseline"], {}).get(key)), color="black", lw=0.8, ls="--")
    fig.suptitle(f"Step time vs scoring cost (baseline {results['baseline']}: dashed)")
    return png_bytes(fig)


def generation_png(results: Mapping[str, Any]) -> bytes:
    runtimes = results["runtimes"]
    names = list(runtimes)
    x = list(range(len(names)))
    fig, (left, right) = subplots(max(8.0, 1.6 * len(names) + 4), 4.2, ncols=2, constrained=True)
    for offset, key, label, colour in (
        (-0.2, "gen_tokens_per_s_alone", "alone", "#999999"),
        (0.2, "gen_tokens_per_s_together", "together", "#4c72b0"),
    ):
        est = [runtimes[n][key] for n in names]
        left.bar(
            [i + offset for i in x],
            [_mean(e) for e in est],
            width=0.4,
            yerr=_err(est),
            capsize=3,
            color=colour,
            label=label,
        )
    left.set_xticks(x, names)
    left.set_ylabel("generated tokens/s")
    left.set_title("Generation alone vs beside scoring (95% CI)")
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    est = [runtimes[n]["timeboxed_rollouts_per_hour"] for n in names]
    right.bar(names, [_mean(e) for e in est], yerr=_err(est), capsize=4, color="#55a868")
    right.set_ylabel("rollouts generated and scored per hour")
    right.set_title(f"Time-boxed, {results.get('timebox_budget_s')} s budget (95% CI)")
    right.set_ylim(bottom=0)
    return png_bytes(fig)


def write_figures(out: Path, results: Mapping[str, Any]) -> list[str]:
    """Write the PNGs into ``out``; returns their file names (none before the first measurement)."""
    if not results.get("runtimes"):
        return []
    files = {"pool_time.png": pool_time_png, "step_vs_cost.png": step_vs_cost_png, "generation.png": generation_png}
    for name, draw in files.items():
        atomic_write_bytes(Path(out) / name, draw(results))
    return list(files)
