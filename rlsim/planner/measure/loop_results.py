"""Read what the real loop measured (issue 4's ``results.json``, issue 5's contention ``results.json``).

A loop run's file is read through ``rlsim.run_results.RunResults``, the model the loop writes with.

From a loop run: generation tokens/s at the run's concurrency (one ``GenerationPoint`` per run, the
median over steps), update and sync seconds against tokens per step, and the orchestration overhead
(``idle``). From the contention experiment: per runtime ``gen_slowdown`` (and ``score_slowdown`` if
present), as fractions (0.25 = 25 % slower). Anything a file lacks is reported, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.io import read_user_text
from rlsim.planner.profile.fitting import fit_cost_per_token
from rlsim.planner.profile.schema import ContentionEntry, GenerationPoint, ProfileAnchor, TrainerModel
from rlsim.run_results import RunResults, StepTimes


@dataclass
class LoopSteps:
    """Per step arrays from one results.json: seconds per phase and generated tokens (or None)."""

    path: Path
    time_s: dict[str, np.ndarray]
    tokens: np.ndarray | None
    rollouts: np.ndarray
    numbers: list[int] = field(default_factory=list)  # the loop's step numbers (from 1) of the kept steps


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path`` (the contention experiment's results, which have no typed model yet)."""
    if not path.is_file():
        raise RlsimError(f"results file {path} does not exist; run the loop (`rlsim run CONFIG --out DIR`) first")
    try:
        data = json.loads(read_user_text(path, "results file"))
    except json.JSONDecodeError as err:
        raise RlsimError(f"{path} is not valid JSON ({err}); point at a results.json written by rlsim") from None
    if not isinstance(data, dict):
        raise RlsimError(f"{path} must hold a JSON object")
    return data


def read_loop_steps(path: str | Path, skip_first: int = 1) -> LoopSteps:
    """Parse ``steps[].time_s.{generate,score,update,sync,idle,total}`` (issue 4's schema).

    ``skip_first`` steps are dropped as warm-up (engine start, compilation) when more remain.
    """
    p = Path(path)
    return parse_loop_steps(RunResults.read(p), p, skip_first)


def parse_loop_steps(data: RunResults | dict[str, Any], source: Path, skip_first: int = 1) -> LoopSteps:
    """``read_loop_steps`` on an already loaded results.json (``source`` names it in messages). A run that
    records its own ``warmup_steps`` (the planner's loop runner, which runs none on warm actors) drops those
    instead of ``skip_first``."""
    results = data if isinstance(data, RunResults) else RunResults.parse(data, source)
    if not results.steps:
        raise RlsimError(f"{source} has no steps; it must be the results.json of `rlsim run` with a completed step")
    skip_first = results.warmup(skip_first)
    first = skip_first if len(results.steps) > skip_first else 0
    steps = results.steps[first:]
    phases = ("generate", "score", "update", "sync", "idle", "total")
    time_s = {ph: np.array([float(getattr(s.time_s, ph)) for s in steps]) for ph in phases}
    # A step with the reference or the critic also records their phases (``StepTimes.OPTIONAL``).
    for ph in StepTimes.OPTIONAL:
        if all(getattr(s.time_s, ph) is not None for s in steps):
            time_s[ph] = np.array([float(getattr(s.time_s, ph)) for s in steps])
    rollouts = np.array([float(s.rollouts.generated) for s in steps])
    generated = [s.tokens.generated for s in steps if s.tokens is not None]
    tokens = np.array(generated, dtype=float) if len(generated) == len(steps) else None
    return LoopSteps(source, time_s, tokens, rollouts, [s.step for s in steps])


def finished_at(results: Path) -> str | None:
    """When a run's results file was last written (ISO 8601, UTC), None if it cannot be read."""
    try:
        return datetime.fromtimestamp(results.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
    except OSError:
        return None


def anchor_record(
    name: str,
    loop_set: str,
    config_json: dict[str, Any],
    results_path: Path,
    skip_first: int,
    loads: dict[int, float] | None = None,
    disturbed_above: float | None = None,
) -> ProfileAnchor:
    """The anchor's measured step for the profile: medians over the steps after ``skip_first`` (the loop set's
    warm-up), less those other programs disturbed (``loads``, ``disturbed_above``: as validation drops them)."""
    steps, _ = drop_disturbed(read_loop_steps(results_path, skip_first), loads or {}, disturbed_above)
    return ProfileAnchor(
        config=name,
        loop_set=loop_set,
        measured_step_s=float(np.median(steps.time_s["total"])),
        phases_s={p: float(np.median(v)) for p, v in steps.time_s.items() if p != "total"},
        steps=steps.numbers,
        measured_at=finished_at(results_path) or "unknown",
        warmup_steps=skip_first,
        run_config=config_json,
    )


@dataclass(frozen=True)
class RunSettings:
    """How a loop run was set up, read from its results.json: sequences submitted per step and the
    cores the rollout and trainer actors were pinned to."""

    rollouts_per_step: int
    rollout_units: float
    trainer_units: float


def read_run_settings(path: str | Path) -> RunSettings:
    """``config.workload`` and ``placement`` of a results.json written by ``rlsim run``."""
    p = Path(path)
    results = RunResults.read(p)
    rollouts = results.rollouts_per_step()
    if rollouts is None or not {"rollout", "trainer"} <= set(results.placement):
        raise RlsimError(
            f"{p} does not say how the run was set up (config.workload, placement.*.cores); "
            "give running and units for it in the profile config"
        )
    placement = results.placement
    return RunSettings(rollouts, float(len(placement["rollout"].cores)), float(len(placement["trainer"].cores)))


def generation_point(run: LoopSteps, running: float, units: float) -> GenerationPoint:
    """Median generated tokens/s over the run's steps, at ``running`` sequences on ``units``."""
    if run.tokens is None:
        raise RlsimError(
            f"{run.path} has no generated-token counts per step, so generation throughput cannot be measured from it"
        )
    rate = float(np.median(run.tokens / run.time_s["generate"]))
    return GenerationPoint(running=running, units=units, tokens_per_s=rate, source=str(run.path))


def trainer_model(runs: list[LoopSteps], units: float) -> TrainerModel:
    """Fit update and sync seconds against generated tokens over every step of ``runs``."""
    tokens = np.concatenate([r.tokens for r in runs if r.tokens is not None])
    if tokens.size == 0:
        raise RlsimError("no loop results with generated-token counts; cannot fit the update cost per token")
    with_tokens = [r for r in runs if r.tokens is not None]
    update = np.concatenate([r.time_s["update"] for r in with_tokens])
    sync = np.concatenate([r.time_s["sync"] for r in with_tokens])
    idle = np.concatenate([r.time_s["idle"] for r in runs])
    update_fixed, update_per = fit_cost_per_token(tokens, update)
    sync_fixed, sync_per = fit_cost_per_token(tokens, sync)
    return TrainerModel(
        units=units,
        update_fixed_s=update_fixed,
        update_s_per_token=update_per,
        sync_fixed_s=sync_fixed,
        sync_s_per_token=sync_per,
        step_overhead_s=float(np.mean(idle)),
    )


def _mean_of(entry: Any) -> float | None:
    if isinstance(entry, dict) and isinstance(entry.get("mean"), (int, float)):
        return float(entry["mean"])
    if isinstance(entry, (int, float)):
        return float(entry)
    return None


def read_contention(path: str | Path) -> tuple[dict[str, ContentionEntry], list[str]]:
    """Per runtime slowdowns from issue 5's results.json; returns them and what was missing.

    A runtime without ``score_slowdown`` keeps ``gen_slowdown`` for both, and that is reported.
    """
    p = Path(path)
    runtimes = read_json(p).get("runtimes")
    if not isinstance(runtimes, dict) or not runtimes:
        raise RlsimError(f"{p} has no `runtimes` object; it must be the results.json of `rlsim experiment contention`")
    out, missing = {}, []
    for name, figures in runtimes.items():
        gen = _mean_of(figures.get("gen_slowdown")) if isinstance(figures, dict) else None
        if gen is None:
            missing.append(f"contention for {name}: {p} has no gen_slowdown.mean")
            continue
        score = _mean_of(figures.get("score_slowdown"))
        if score is None:
            missing.append(f"score_slowdown for {name} (not in {p}; assumed equal to its gen_slowdown)")
            score = gen
        out[name] = ContentionEntry(gen_slowdown=max(gen, 0.0), score_slowdown=max(score, 0.0))
    return out, missing


def drop_disturbed(steps: LoopSteps, loads: dict[int, float], above: float | None) -> tuple[LoopSteps, list[int]]:
    """``steps`` without those during which other programs took more than ``above`` of the cores
    (``loads``: step number -> that share). Keeps every step when none would be left or ``above``
    is None. Returns the kept steps and the dropped step numbers."""
    if above is None:
        return steps, []
    keep = [i for i, n in enumerate(steps.numbers) if loads.get(n, 0.0) <= above]
    if not keep or len(keep) == len(steps.numbers):
        return steps, []
    dropped = [n for i, n in enumerate(steps.numbers) if i not in keep]
    return LoopSteps(
        path=steps.path,
        time_s={k: v[keep] for k, v in steps.time_s.items()},
        tokens=None if steps.tokens is None else steps.tokens[keep],
        rollouts=steps.rollouts[keep],
        numbers=[steps.numbers[i] for i in keep],
    ), dropped
