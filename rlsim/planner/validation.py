"""``rlsim plan --validate``: predicted vs measured step time on real-loop configurations.

For each configuration of a validation set (``validation_set.py``): the planner's ``predict_step``
for the very steps the loop will run (their lengths replayed, see ``predict.loop_trace``), then the
real loop through a ``LoopRunner``, then the comparison. The first ``warmup_steps`` of every run are
dropped (vLLM and the scorers warm up); the measured step time is the median of the rest, and the
prediction is the median of the same steps simulated. ``error = predicted / measured - 1``.

The JSON (issue 6) is rewritten atomically after every configuration, so an interrupted validation
keeps what it measured: ``{"configs": [{"name", "predicted_step_s", "measured_step_s", "error", ...}],
"median_abs_error": f, "max_abs_error": f, "complete": bool}``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from rlsim.io import atomic_write_json
from rlsim.planner.evaluate import Evaluation
from rlsim.planner.loop_results import LoopSteps, parse_loop_steps
from rlsim.planner.loop_runner import LoopRunner, reusable_results, run_load, wait_if_asked
from rlsim.planner.predict import predict_step
from rlsim.planner.profile import Profile
from rlsim.planner.validation_set import LoopCase, QuietGate

PHASES = ("generate", "score", "update", "sync", "idle")
Note = Callable[[str, dict[str, Any] | None], None]  # (message, finished entry or None)


def validation_entry(name: str, predicted: Evaluation, measured: LoopSteps) -> dict[str, Any]:
    """One configuration: step time and rollouts/hour, predicted and measured; ``error`` is relative.

    Both step times are medians over the measured steps. ``error = predicted / measured - 1``
    (+0.05: the planner predicts a 5 % slower step than the loop ran).
    """
    measured_step = float(np.median(measured.time_s["total"]))
    predicted_totals = [s.time_s["total"] for s in predicted.steps]
    predicted_step = float(np.median(predicted_totals))
    rollouts = float(np.median(measured.rollouts))
    return {
        "name": name,
        "predicted_step_s": predicted_step,
        "measured_step_s": measured_step,
        "error": predicted_step / measured_step - 1.0,
        "predicted_rollouts_per_hour": rollouts * 3600.0 / predicted_step,
        "measured_rollouts_per_hour": rollouts * 3600.0 / measured_step,
        "rollouts_per_step": rollouts,
        "phases_s": {p: {"predicted": float(np.median([s.time_s[p] for s in predicted.steps])),
                         "measured": float(np.median(measured.time_s[p]))} for p in PHASES},
        "steps": measured.numbers,
        "predicted_steps_s": predicted_totals,
        "measured_steps_s": [float(x) for x in measured.time_s["total"]],
        "bottleneck": predicted.bottleneck,
    }


def validation_report(entries: Sequence[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    """``{"configs": [...], "median_abs_error": f, "max_abs_error": f, **meta}`` over every configuration."""
    errors = np.abs([e["error"] for e in entries]) if entries else np.zeros(0)
    return {
        **meta,
        "configs": list(entries),
        "median_abs_error": float(np.median(errors)) if errors.size else None,
        "mean_abs_error": float(np.mean(errors)) if errors.size else None,
        "max_abs_error": float(np.max(errors)) if errors.size else None,
    }


def run_validation(
    cases: Sequence[LoopCase],
    profile: Profile,
    runner: LoopRunner,
    runs_dir: Path,
    json_path: Path | None,
    warmup_steps: int = 1,
    reuse: bool = False,
    note: Note | None = None,
    meta: dict[str, Any] | None = None,
    quiet: QuietGate | None = None,
) -> dict[str, Any]:
    """Predict, run and compare every case in order; returns (and keeps writing) the report.

    Every prediction is made before its run starts. ``reuse``: a case whose complete results are
    already in ``runs_dir/NAME`` (same config) is not run again. ``note(message, entry)`` reports progress.
    """
    tell = note or (lambda _msg, _entry: None)
    entries: list[dict[str, Any]] = []
    meta = dict(meta or {})
    for case in cases:
        steps = list(range(warmup_steps + 1, case.config.steps + 1))
        predicted = predict_step(case.config, profile, replay=steps)
        out = runs_dir / case.name
        results = reusable_results(out, case) if reuse else None
        reused = results is not None
        tell(f"{case.name}: {'reusing ' + str(out) if results else 'running'} "
             f"(predicted {np.median([s.time_s['total'] for s in predicted.steps]):.2f} s/step)", None)
        waited = None
        if results is None:
            waited = wait_if_asked(quiet, lambda msg: tell(msg, None))
            results = runner.run(case, out)
        measured = parse_loop_steps(results, out / "results.json", skip_first=warmup_steps)
        entry = validation_entry(case.name, predicted, measured)
        entry.update(note=case.note, schedule=case.config.schedule, placement=case.config.placement.preset,
                     runtime=case.config.reward.runtime, reused=reused,
                     run_dir=str(out), load_avg_1m=_load(), quiet_wait=waited,
                     foreign_cpu_share=run_load(out).get("foreign_cpu_share"))
        entries.append(entry)
        tell(f"{case.name}: measured {entry['measured_step_s']:.2f} s, error {entry['error']:+.1%}", entry)
        report = validation_report(entries, **meta, complete=len(entries) == len(cases))
        if json_path is not None:
            atomic_write_json(json_path, report)
    return validation_report(entries, **meta, complete=True)


def _load() -> float | None:
    """The 1-minute load average: the machine's other work, which the measured times include."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
