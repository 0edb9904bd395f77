"""Predicted vs measured step time, in the JSON shape issue 6 asks ``rlsim plan --validate`` for.

``--validate`` itself (running the real loop on configurations not used in calibration) arrives
with the loop; this module is the comparison it will use: for each configuration, the planner's
``predict_step`` against the loop's ``results.json`` (warm-up step dropped, median over steps).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlsim.planner.evaluate import Evaluation
from rlsim.planner.loop_results import LoopSteps

PHASES = ("generate", "score", "update", "sync", "idle")


def validation_entry(name: str, predicted: Evaluation, measured: LoopSteps) -> dict[str, Any]:
    """One configuration: step time and rollouts/hour, predicted and measured; ``error`` is relative.

    ``error = predicted / measured - 1`` (+0.05: the planner predicts 5 % too slow a step).
    """
    measured_step = float(np.median(measured.time_s["total"]))
    rollouts = float(np.median(measured.rollouts))
    return {
        "name": name,
        "predicted_step_s": predicted.step_time_s,
        "measured_step_s": measured_step,
        "error": predicted.step_time_s / measured_step - 1.0,
        "predicted_rollouts_per_hour": predicted.rollouts_per_hour,
        "measured_rollouts_per_hour": rollouts * 3600.0 / measured_step,
        "phases_s": {p: {"predicted": predicted.time_s[p], "measured": float(np.median(measured.time_s[p]))}
                     for p in PHASES},
        "measured_steps": int(len(measured.time_s["total"])),
    }


def validation_report(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"configs": [...], "median_abs_error": f, "max_abs_error": f}`` over every configuration."""
    errors = np.abs([e["error"] for e in entries]) if entries else np.zeros(0)
    return {
        "configs": list(entries),
        "median_abs_error": float(np.median(errors)) if errors.size else None,
        "max_abs_error": float(np.max(errors)) if errors.size else None,
    }
