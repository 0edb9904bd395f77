"""``rlsim plan validate``: predicted vs measured step time on real-loop configurations.

For each configuration of a loop set (``runs/loop_set.py``): the planner's ``predict_step``
for the very steps the loop will run (their lengths replayed, see ``predict.loop_trace``), then the
real loop through a ``LoopRunner``, then the comparison. The first ``warmup_steps`` of every run are
dropped (vLLM and the scorers warm up); the measured step time is the median of the rest, and the
prediction is the median of the same steps simulated. ``error = predicted / measured - 1``.
An ``async`` configuration is compared on rollouts trained per hour instead (``throughput``); each
entry names its ``metric``.

The JSON (issue 6) is rewritten atomically after every configuration, so an interrupted validation
keeps what it measured: ``{"configs": [{"name", "predicted_step_s", "measured_step_s", "error", ...}],
"median_abs_error": f, "max_abs_error": f, "complete": bool}``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.io import atomic_write_json
from rlsim.placement import PlacementConfig
from rlsim.planner.measure.loop_results import LoopSteps, drop_disturbed, parse_loop_steps
from rlsim.planner.measure.loop_runner import LoopRunner, reusable_results, step_loads
from rlsim.planner.measure.loop_set import LoopCase
from rlsim.planner.profile.schema import Profile
from rlsim.planner.sim.evaluate import Evaluation
from rlsim.planner.sim.ppo_roles import ROLE_PHASES
from rlsim.planner.validate.anchor import (
    ANCHOR_RUNS,
    Anchor,
    anchor_run_record,
    anchor_summary,
    apply_anchor,
    profile_hour_step,
)
from rlsim.planner.validate.predict import case_profile, predict_step
from rlsim.planner.validate.throughput import async_run_figures, async_validation_entry, with_trained_counts
from rlsim.run_results import RunResults
from rlsim.schedule_kinds import schedule_kind

PHASES = ("generate", "score", "update", "sync", "idle")
Note = Callable[[str, dict[str, Any] | None], None]  # (message, finished entry or None)


def validation_entry(
    name: str, predicted: Evaluation, measured: LoopSteps, predicted_numbers: Sequence[int] | None = None
) -> dict[str, Any]:
    """One configuration: step time and rollouts/hour, predicted and measured; ``error`` is relative.

    Both step times are medians over the measured steps (``predicted_numbers``: the loop step number
    of each predicted step, to compare the same steps; None: all of them). ``error = predicted /
    measured - 1`` (+0.05: the planner predicts a 5 % slower step than the loop ran).
    """
    steps = predicted.steps
    if predicted_numbers is not None:
        at = {n: s for n, s in zip(predicted_numbers, predicted.steps, strict=True)}
        steps = [at[n] for n in measured.numbers]
    measured_step = float(np.median(measured.time_s["total"]))
    predicted_totals = [s.time_s["total"] for s in steps]
    predicted_step = float(np.median(predicted_totals))
    rollouts = float(np.median(measured.rollouts))
    return {
        "name": name,
        "metric": "step_time_s",
        "predicted_step_s": predicted_step,
        "measured_step_s": measured_step,
        "error": predicted_step / measured_step - 1.0,
        "predicted_rollouts_per_hour": rollouts * 3600.0 / predicted_step,
        "measured_rollouts_per_hour": rollouts * 3600.0 / measured_step,
        "rollouts_per_step": rollouts,
        "phases_s": {
            p: {
                "predicted": float(np.median([s.time_s[p] for s in steps])),
                "measured": float(np.median(measured.time_s[p])),
            }
            for p in (*PHASES, *ROLE_PHASES)
            if p in measured.time_s and p in steps[0].time_s
        },
        "steps": measured.numbers,
        "predicted_steps_s": predicted_totals,
        "measured_steps_s": [float(x) for x in measured.time_s["total"]],
        "bottleneck": predicted.bottleneck,
    }


def validation_report(entries: Sequence[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    """``{"configs": [...], "median_abs_error": f, "max_abs_error": f, "by_algorithm": {...}, **meta}``
    over every configuration; ``by_algorithm`` has the same figures per ``trainer.algorithm`` (PPO's
    configurations reported apart from GRPO's). Where configurations carry an ``anchored_error``
    (``validate/anchor.py``), ``anchored`` holds the same figures over those."""
    report = {**meta, "configs": list(entries), **_grouped_stats(entries, "error")}
    anchored = [e for e in entries if e.get("anchored_error") is not None]
    if anchored:
        report["anchored"] = {"configs": len(anchored), **_grouped_stats(anchored, "anchored_error")}
    return report


def _grouped_stats(entries: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """``_error_stats`` of ``key`` over all entries and, under ``by_algorithm``, per algorithm."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(e.get("algorithm", "grpo"), []).append(e)
    return {
        **_error_stats(entries, key),
        "by_algorithm": {name: {"configs": len(group), **_error_stats(group, key)} for name, group in groups.items()},
    }


def merged_report(reports: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One report over several validation reports (``(path, report)`` each, e.g. the GRPO and the PPO
    sets): every configuration, tagged with its set, and the errors over them all and per algorithm.
    Raises ``RlsimError`` for a report that is incomplete (an interrupted validation) or has no configs."""
    entries, sources = [], []
    for path, report in reports:
        if not report.get("complete") or not report.get("configs"):
            raise RlsimError(f"{path} is not a complete `rlsim plan validate` report; finish that validation first")
        entries += [{**e, "validation_set": report.get("validation_set")} for e in report["configs"]]
        sources.append({k: report.get(k) for k in ("validation_set", "date", "profile", "machine", "wall_s", "anchor")})
    return validation_report(entries, sources=sources, merged_from=[path for path, _ in reports])


def _error_stats(entries: Sequence[dict[str, Any]], key: str = "error") -> dict[str, float | None]:
    """Median, mean and largest |``key``| of ``entries`` (None without any)."""
    errors = np.abs([e[key] for e in entries]) if entries else np.zeros(0)
    return {
        "median_abs_error": float(np.median(errors)) if errors.size else None,
        "mean_abs_error": float(np.mean(errors)) if errors.size else None,
        "max_abs_error": float(np.max(errors)) if errors.size else None,
    }


def _placement_label(placement: PlacementConfig) -> str:
    """``shared`` / ``split``, with any colocation groups: ``shared reference+scorer critic+trainer``."""
    return " ".join([placement.preset, *("+".join(group) for group in placement.colocate)])


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
    disturbed_above: float | None = None,
    anchor: Anchor | None = None,
) -> dict[str, Any]:
    """Predict, run and compare every case in order; returns (and keeps writing) the report.

    Every prediction is made before its run starts. ``reuse``: a case whose complete results are
    already in ``runs_dir/NAME`` (same config) is not run again. ``disturbed_above``: measured steps
    during which other programs took more of the cores are left out (see ``drop_disturbed``); the
    entry keeps the error over every step too. ``anchor``: run it before, between and after the cases
    (``runs_dir/anchor-runs/NN``) and add each case's anchored error (``validate/anchor.py``); with
    ``reuse``, an earlier anchor run is kept only where the cases on both sides of it are reused too, so a
    case run now is always anchored by runs made now. ``note(message, entry)`` reports progress.
    """
    tell = note or (lambda _msg, _entry: None)
    entries: list[dict[str, Any]] = []
    anchor_runs: list[dict[str, Any]] = []
    meta = dict(meta or {})
    reused = [reuse and reusable_results(runs_dir / c.name, c) is not None for c in cases]
    hour = profile_hour_step(anchor, profile.anchor) if anchor is not None else (None, "")

    def report(complete: bool) -> dict[str, Any]:
        extra = {"anchor": anchor_summary(anchor, anchor_runs, hour)} if anchor and anchor_runs else {}
        result = validation_report(entries, **meta, **extra, complete=complete)
        if json_path is not None:
            atomic_write_json(json_path, result)
        return result

    def run_anchor() -> None:
        assert anchor is not None
        index = len(anchor_runs) + 1
        steps = list(range(anchor.warmup_steps + 1, anchor.case.config.steps + 1))
        out = runs_dir / ANCHOR_RUNS / f"{index:02d}"
        keep = all(reused[j] for j in (index - 2, index - 1) if 0 <= j < len(cases))  # its neighbours
        tell(f"anchor {index}/{len(cases) + 1}: {anchor.name}", None)
        entry = _compare_case(anchor.case, profile, runner, out, steps, anchor.warmup_steps, keep, disturbed_above)
        anchor_runs.append(anchor_run_record(index, entry))
        if entries:
            apply_anchor(entries[-1], anchor_runs[-2], anchor_runs[-1], hour[0])
        tell(f"anchor {index}: measured {entry['measured_step_s']:.2f} s (x{anchor_runs[-1]['ratio']:.3f})", None)
        report(complete=False)

    if anchor is not None:
        run_anchor()
    for case in cases:
        steps = list(range(warmup_steps + 1, case.config.steps + 1))
        out = runs_dir / case.name
        entry = _compare_case(case, profile, runner, out, steps, warmup_steps, reuse, disturbed_above, tell)
        entries.append(entry)
        measured_as = (
            f"{entry['measured_rollouts_per_hour']:,.0f} rollouts trained/h"
            if entry["metric"] != "step_time_s"
            else f"{entry['measured_step_s']:.2f} s"
        )
        tell(f"{case.name}: measured {measured_as}, error {entry['error']:+.1%}", entry)
        report(complete=anchor is None and len(entries) == len(cases))
        if anchor is not None:
            run_anchor()
    return report(complete=True)


class _NoRuns:
    """A loop runner for runs that must already exist (``own_run_errors``): asked to run, it refuses."""

    def run(self, case: LoopCase, out: Path) -> RunResults:
        raise RlsimError(f"{case.name}: no complete run of this config in {out} to re-predict")

    def close(self) -> None:
        return None


def own_run_errors(
    cases: Sequence[LoopCase], profile: Profile, runs_dir: Path, warmup_steps: int, disturbed_above: float | None
) -> dict[str, float]:
    """``rlsim profile``'s check of its own fit: each calibration run in ``runs_dir/NAME`` re-predicted by the
    finished ``profile``, ``{name: error}`` with the error as ``plan validate`` defines it. A fit that misses its
    own runs by much cannot follow them: a host that ran at another speed for part of the loop set does this
    (docs/planner.md). Cases without a complete run of their config there, or that the profile cannot predict
    (a reward it has no entry for), are left out."""
    errors = {}
    for case in cases:
        steps = list(range(warmup_steps + 1, case.config.steps + 1))
        try:  # reuse=True: a case without its run there asks _NoRuns to run it, which refuses
            entry = _compare_case(case, profile, _NoRuns(), runs_dir / case.name, steps, warmup_steps, True,
                                  disturbed_above)  # fmt: skip
        except RlsimError:
            continue
        errors[case.name] = round(float(entry["error"]), 4)
    return errors


def _compare_case(
    case: LoopCase,
    profile: Profile,
    runner: LoopRunner,
    out: Path,
    steps: list[int],
    warmup_steps: int,
    reuse: bool,
    disturbed_above: float | None,
    tell: Note | None = None,
) -> dict[str, Any]:
    """Predict ``case`` for its measured ``steps``, run it into ``out`` (or reuse a run there), compare."""
    case_prof = case_profile(profile, case.config.reward.runtime, case.profile_runtime)
    predicted = predict_step(case.config, case_prof, replay=steps)
    results = reusable_results(out, case) if reuse else None
    reused = results is not None
    if tell is not None:
        tell(
            f"{case.name}: {'reusing ' + str(out) if results else 'running'} "
            f"(predicted {np.median([s.time_s['total'] for s in predicted.steps]):.2f} s/step)",
            None,
        )
    if results is None:
        results = runner.run(case, out)
    every = parse_loop_steps(results, out / "results.json", skip_first=warmup_steps)
    compare, numbers = validation_entry, steps
    pipelined = schedule_kind(case.config.schedule).pipelined
    if pipelined:  # throughput, over the whole predicted run's steps 1, 2, ...
        compare, numbers = async_validation_entry, list(range(1, len(predicted.steps) + 1))
        every = with_trained_counts(every, results)
    loads = step_loads(out)
    measured, dropped = drop_disturbed(every, loads, disturbed_above)
    entry = compare(case.name, predicted, measured, numbers)
    entry.update(
        note=case.note,
        algorithm=case.config.trainer.algorithm,
        schedule=case.config.schedule,
        placement=_placement_label(case.config.placement),
        runtime=case.config.reward.runtime,
        reused=reused,
        run_dir=str(out),
        foreign_cpu_share={str(n): round(loads[n], 3) for n in every.numbers if n in loads},
        dropped_steps=dropped,
        error_all_steps=compare(case.name, predicted, every, numbers)["error"],
    )
    if pipelined:
        entry.update(async_run_figures(predicted, results))
    return entry
