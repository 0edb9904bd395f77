"""Hand-made measurement rows (the shape ``Measurement.as_dict()`` writes) with answers known by hand.

Two runtimes on a 2-core pool, 3 repeats: ``eager`` (the baseline) and ``fast``. Per repeat r = 0, 1, 2:

=========================  ===============  ===============
figure                      eager            fast
=========================  ===============  ===============
together step_s             10, 11, 12       10, 10.5, 12.5
together score_core_s       3.0, 3.2, 3.4    1.0, 1.1, 1.2
together gen_tokens_per_s   100, 100, 100    110, 112, 114
gen_alone gen_tokens_per_s  125, 125, 125    121, 123.2, 125.4
gen_alone core-s/rollout    0.4, 0.5, 0.5    0.6, 0.5, 0.5
score_alone rollouts/s      40, 40, 40       60, 60, 60
together rollouts/s         20, 20, 20       50, 50, 50
timeboxed rollouts/hour     1000, 1100, 1200 1500, 1500, 1500
=========================  ===============  ===============

Repeat 0 of eager has two together steps (score_core_s 2.9 and 3.1) whose mean is the 3.0 above, to
check that steps are averaged within a repeat before anything else.
"""

from __future__ import annotations

from typing import Any

TABLE = {
    "eager": {
        "together": {
            "step_s": [10, 11, 12],
            "score_core_s": [3.0, 3.2, 3.4],
            "gen_tokens_per_s": [100, 100, 100],
            "score_rollouts_per_s": [20, 20, 20],
            "score_exposed_s": [1.0, 1.1, 1.2],
            "score_critical_share": [0.1, 0.1, 0.1],
            "score_gpu_s": [0, 0, 0],
        },
        "gen_alone": {"gen_tokens_per_s": [125, 125, 125], "gen_core_s_per_rollout": [0.4, 0.5, 0.5]},
        "score_alone": {"score_rollouts_per_s": [40, 40, 40], "score_core_s": [2.0, 2.0, 2.0]},
        "timeboxed": {"rollouts_per_hour": [1000, 1100, 1200]},
    },
    "fast": {
        "together": {
            "step_s": [10, 10.5, 12.5],
            "score_core_s": [1.0, 1.1, 1.2],
            "gen_tokens_per_s": [110, 112, 114],
            "score_rollouts_per_s": [50, 50, 50],
            "score_exposed_s": [0.5, 0.5, 0.5],
            "score_critical_share": [0.05, 0.05, 0.04],
            "score_gpu_s": [0, 0, 0],
        },
        "gen_alone": {"gen_tokens_per_s": [121, 123.2, 125.4], "gen_core_s_per_rollout": [0.6, 0.5, 0.5]},
        "score_alone": {"score_rollouts_per_s": [60, 60, 60], "score_core_s": [0.8, 0.8, 0.8]},
        "timeboxed": {"rollouts_per_hour": [1500, 1500, 1500]},
    },
}
POOL_CORES = 2
# Pool core-seconds of every together step by group: generate 8, score = its score_core_s, update 6,
# orchestration 0.3 + idle scorers 0.1, other 1.0, kernel 0.1, idle = the rest of 2 x step_s.
FIXED = {"generate": 8.0, "update": 6.0, "orchestration": 0.3, "idle_scorers": 0.1, "other": 1.0, "kernel": 0.1}


def _pool(core_s: dict[str, float], pool_core_s: float) -> dict[str, Any]:
    accounted = sum(core_s.values())
    residual = (accounted - pool_core_s) / pool_core_s
    return {
        "seconds": pool_core_s / POOL_CORES,
        "cores": POOL_CORES,
        "core_s": core_s,
        "pool_core_s": pool_core_s,
        "accounted_core_s": accounted,
        "residual_fraction": residual,
        "within_5pct": abs(residual) <= 0.05,
        "checked": True,
        "notes": [],
    }


def row(runtime: str, condition: str, repeat: int, figures: dict[str, float], step: int = 1) -> dict[str, Any]:
    if condition == "together":
        core_s = {**FIXED, "score": figures["score_core_s"]}
        pool = POOL_CORES * figures["step_s"]
        core_s["idle"] = pool - sum(core_s.values())
    else:
        core_s, pool = {"generate": 1.0, "idle": 1.0}, 2.0
    return {
        "condition": condition,
        "runtime": runtime,
        "repeat": repeat,
        "step": step,
        "figures": dict(figures),
        "pool": _pool(core_s, pool),
    }


def rows() -> list[dict[str, Any]]:
    out = []
    for runtime, conditions in TABLE.items():
        for repeat in range(3):
            for condition, figures in conditions.items():
                values = {k: float(v[repeat]) for k, v in figures.items()}
                if runtime == "eager" and condition == "together" and repeat == 0:
                    out.append(row(runtime, condition, repeat, {**values, "score_core_s": 2.9}, step=1))
                    out.append(row(runtime, condition, repeat, {**values, "score_core_s": 3.1}, step=2))
                else:
                    out.append(row(runtime, condition, repeat, values))
    return out
