"""A placement's simulated steps summarised (``Evaluation``): step time, rollouts/hour, utilisation, bottleneck.

Shared by the step-by-step evaluation (``sim/evaluate.py``) and the async pipeline's (``sim/asynchronous/evaluate.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlsim.planner.sim.ppo_roles import ROLE_PHASES
from rlsim.planner.sim.step_types import PHASES, StepResult
from rlsim.planner.spec.cluster import PlacementSpec
from rlsim.planner.spec.placement import Resources

# An engine whose makespan is this much above the mean marks generation as straggler-bound.
STRAGGLER_RATIO = 1.25


@dataclass(frozen=True)
class Evaluation:
    """A placement's simulated steps, summarised. Times in seconds; utilisation in [0, 1]."""

    spec: PlacementSpec
    resources: Resources
    steps: list[StepResult]
    step_time_s: float
    step_time_std_s: float
    rollouts_per_hour: float
    time_s: dict[str, float]
    utilisation: dict[str, float]
    bottleneck: str
    bottleneck_detail: str
    illustrative: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (per-step totals kept, per-step breakdowns summarised)."""
        res = self.resources
        return {
            "placement": self.spec.model_dump(mode="json"),
            "label": self.spec.label(),
            "resources": {
                "nodes": res.nodes,
                "engines": res.engines,
                "engine_units": res.engine_units,
                "gen_device": res.gen_device,
                "scorer_device": res.scorer_device,
                "replicas": res.replicas,
                "replica_units": res.replica_units,
                "shared": res.shared,
                "max_running": res.max_running,
                "used": res.units_used(),
            },
            "step_time_s": self.step_time_s,
            "step_time_std_s": self.step_time_std_s,
            "rollouts_per_hour": self.rollouts_per_hour,
            "time_s": self.time_s,
            "utilisation": self.utilisation,
            "bottleneck": {"name": self.bottleneck, "detail": self.bottleneck_detail},
            "padding_waste": float(np.mean([s.padding_waste for s in self.steps])),
            "step_totals_s": [s.time_s["total"] for s in self.steps],
            "illustrative_profile": self.illustrative,
            **self.extra,  # schedule-specific figures, e.g. ``async`` (sim.asynchronous.evaluate)
        }


def summarise(spec: PlacementSpec, res: Resources, steps: list[StepResult], illustrative: bool) -> Evaluation:
    """Means over steps, utilisation per activity and device, and the bottleneck's name."""
    totals = np.array([s.time_s["total"] for s in steps])
    mean_total = float(totals.mean())
    roles = tuple(p for p in ROLE_PHASES if p in steps[0].time_s)
    time_s = {p: float(np.mean([s.time_s[p] for s in steps])) for p in (*PHASES, "score_tail", "total", *roles)}
    rollouts = float(np.mean([s.rollouts for s in steps]))
    name, detail = bottleneck(steps, time_s, res)
    return Evaluation(
        spec=spec,
        resources=res,
        steps=steps,
        step_time_s=mean_total,
        step_time_std_s=float(totals.std(ddof=1)) if len(steps) > 1 else 0.0,
        rollouts_per_hour=rollouts * 3600.0 / mean_total,
        time_s=time_s,
        utilisation=utilisation(steps, res),
        bottleneck=name,
        bottleneck_detail=detail,
        illustrative=illustrative,
    )


def utilisation(steps: list[StepResult], res: Resources) -> dict[str, float]:
    """Busy share of each activity's units over the whole step (generation, scoring, training)."""
    total = sum(s.time_s["total"] for s in steps)
    gen = sum(s.gen_busy_unit_s for s in steps) / (res.gen_units * total)
    score = sum(s.score_busy_unit_s for s in steps) / (res.scoring_units * total)
    train = sum(s.time_s["update"] + s.time_s["sync"] for s in steps) / total
    return {"generation": gen, "scoring": score, "training": train, "generation_units_overall": min(1.0, gen + train)}


def bottleneck(steps: list[StepResult], time_s: dict[str, float], res: Resources) -> tuple[str, str]:
    """The phase on the critical path (``CRITICAL_PATH``) that takes longest, with a reason in words."""
    parts = {
        "generation": time_s["generate"],
        "scoring": time_s["score_tail"],
        "update": time_s["update"],
        "sync": time_s["sync"],
        "overhead": time_s["idle"],
    }
    name = max(parts, key=lambda k: parts[k])
    share = parts[name] / time_s["total"]
    if name == "generation":
        idle = max(s.idle_engines for s in steps)
        if idle:
            return name, (
                f"generation is {share:.0%} of the step and {idle} of {res.engines} engines get no "
                "rollout: the step has fewer rollouts than engines (raise prompts_per_step or use "
                "fewer, larger engines)"
            )
        ratio = float(np.mean([s.engine_makespan_max_s / max(s.engine_makespan_mean_s, 1e-12) for s in steps]))
        if ratio >= STRAGGLER_RATIO:
            return name, (
                f"generation is {share:.0%} of the step; long-tail stragglers: the slowest engine "
                f"takes {ratio:.2f}x the mean engine, so more engines help less than shorter tails"
            )
        return name, f"generation is {share:.0%} of the step with {res.engines} engine(s) evenly loaded"
    if name == "scoring":
        return name, (
            f"rewards arrive {time_s['score_tail']:.2f} s after the last rollout ({share:.0%} of the step); "
            f"{res.replicas} replicas of {res.replica_units:g} {_units(res.scorer_device)} fall behind"
        )
    return name, f"{name} is {share:.0%} of the step"


def _units(device: str) -> str:
    return "GPUs" if device == "cuda" else "cores"
