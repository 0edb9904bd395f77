"""Capacity arithmetic: measured conditions -> one sample per repeat of every figure the report shows.

All plain arithmetic on recorded measurements (``Measurement.as_dict()`` rows), so it is tested on
hand-made records with answers worked out by hand. A repeat's sample is the mean over its steps.
Differences against the baseline runtime are taken *within* a repeat (both ran in the same session,
interleaved), so the session-to-session spread cancels out of them.

Units: seconds, core-seconds (one core busy for one second), tokens/s, rollouts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

# Pool time of a "together" step per activity, as drawn in the stacked bar. The rollout actor also
# loads the new weights and the trainer exports them, so weight sync is inside generate and update.
BAR_GROUPS = {
    "generate": ("generate",),
    "score": ("score",),
    "reference": ("reference",),
    "critic": ("critic",),
    "update": ("update",),
    "orchestration": ("orchestration", "idle_scorers"),
    "other processes": ("other",),
    "kernel": ("kernel",),
    "idle": ("idle",),
}

# Bars only a step with the reference and the critic (PPO, or a KL) has: left out of GRPO's figures.
EXPERIENCE_BARS = ("reference", "critic")

Samples = dict[int, float]  # repeat -> value


def per_repeat(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Samples]]:
    """runtime -> "condition.figure" -> repeat -> mean over that repeat's steps.

    Pool time per bar group is added as ``"together.pool.<group>"`` (core-seconds per step; a row of
    an async run, which trained ``row["updates"]`` batches, per update). The reference and critic bars
    only where those roles ran.
    """
    sums: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for row in rows:
        rt, cond, rep = row["runtime"], row["condition"], int(row["repeat"])
        for key, value in row["figures"].items():
            sums[(rt, f"{cond}.{key}", rep)].append(float(value))
        if cond == "together":
            core_s, updates = row["pool"]["core_s"], row.get("updates", 1)
            for bar, groups in BAR_GROUPS.items():
                if bar in EXPERIENCE_BARS and bar not in core_s:
                    continue
                sums[(rt, f"together.pool.{bar}", rep)].append(sum(core_s.get(g, 0.0) for g in groups) / updates)
    out: dict[str, dict[str, Samples]] = defaultdict(lambda: defaultdict(dict))
    for (rt, key, rep), values in sums.items():
        out[rt][key][rep] = sum(values) / len(values)
    return {rt: dict(figs) for rt, figs in out.items()}


def measured_bars(per: Mapping[str, Mapping[str, Samples]]) -> list[str]:
    """The bar groups of ``BAR_GROUPS`` to report: all, less the experience roles' where none ran."""
    ran = {key for figures in per.values() for key in figures}
    return [b for b in BAR_GROUPS if b not in EXPERIENCE_BARS or f"together.pool.{b}" in ran]


def _common(*series: Samples) -> list[int]:
    keys = set(series[0])
    for s in series[1:]:
        keys &= set(s)
    return sorted(keys)


def generation_cost_per_rollout(per: Mapping[str, Mapping[str, Samples]]) -> Samples:
    """Core-seconds per rollout of generation alone, per repeat: the mean over every runtime's
    gen_alone steps in that repeat (the condition is the same for all runtimes; scoring is idle)."""
    values: dict[int, list[float]] = defaultdict(list)
    for figures in per.values():
        for rep, v in figures.get("gen_alone.gen_core_s_per_rollout", {}).items():
            values[rep].append(v)
    return {rep: sum(v) / len(v) for rep, v in values.items()}


def capacity_samples(
    per: Mapping[str, Mapping[str, Samples]], runtime: str, baseline: str, pool_cores: int
) -> dict[str, list[float]]:
    """Per repeat (paired with the baseline in the same repeat) for ``runtime``:

    - ``freed_core_s``: baseline's scoring core-s per together step minus this runtime's;
    - ``freed_pool_share``: that over the pool's core-seconds in a baseline step (cores x step time);
    - ``freed_gpu_s``: the same in GPU-seconds (scorers' busy time x GPU share; 0 on CPU);
    - ``extra_gen_tokens_per_s``: generation tokens/s together, this runtime minus baseline;
    - ``extra_rollouts_per_step``: freed core-s / generation core-s per rollout (measured alone);
    - ``extra_rollouts_per_hour``: time-boxed rollouts per hour, this runtime minus baseline.
    """
    rt, base = defaultdict(dict, per.get(runtime, {})), defaultdict(dict, per.get(baseline, {}))
    cost = generation_cost_per_rollout(per)
    score, step, tps, rph = (
        "together.score_core_s",
        "together.step_s",
        "together.gen_tokens_per_s",
        "timeboxed.rollouts_per_hour",
    )
    out: dict[str, list[float]] = defaultdict(list)
    for rep in _common(rt[score], base[score], base[step], cost):
        freed = base[score][rep] - rt[score][rep]
        out["freed_core_s"].append(freed)
        out["freed_pool_share"].append(freed / (pool_cores * base[step][rep]))
        out["extra_rollouts_per_step"].append(freed / cost[rep])
    gpu = "together.score_gpu_s"
    for rep in _common(rt[gpu], base[gpu]):
        out["freed_gpu_s"].append(base[gpu][rep] - rt[gpu][rep])
    for rep in _common(rt[tps], base[tps]):
        out["extra_gen_tokens_per_s"].append(rt[tps][rep] - base[tps][rep])
    for rep in _common(rt[rph], base[rph]):
        out["extra_rollouts_per_hour"].append(rt[rph][rep] - base[rph][rep])
    return dict(out)


def values(per: Mapping[str, Mapping[str, Samples]], runtime: str, key: str) -> list[float]:
    """One runtime's samples of ``"condition.figure"`` in repeat order (empty if never measured)."""
    series = per.get(runtime, {}).get(key, {})
    return [series[r] for r in sorted(series)]


def paired(
    per: Mapping[str, Mapping[str, Samples]], a: tuple[str, str], b: tuple[str, str]
) -> tuple[list[float], list[float]]:
    """Two series as pairs (same repeat): ``a`` and ``b`` are ``(runtime, "condition.figure")``; only
    repeats where both were measured, in repeat order."""
    sa, sb = per.get(a[0], {}).get(a[1], {}), per.get(b[0], {}).get(b[1], {})
    common = _common(sa, sb) if sa and sb else []
    return [sa[r] for r in common], [sb[r] for r in common]
