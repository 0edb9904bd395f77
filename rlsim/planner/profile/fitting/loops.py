"""Fit the profile's generation, trainer and contention models to real loop runs, step by step.

Each calibration run is an ``rlsim run`` results.json whose config says exactly which lengths every
step requested (``predict.loop_trace``), so each measured step becomes one equation of the model:

- generation (runs where nothing shares the engine's cores: sequential, or split): the simulated
  engine time is linear in the model's coefficients, ``gen_s = (base x I + per_seq x S) x
  (ref/u)**alpha + prefill x P``, with ``I`` decode iterations, ``S`` sequence-iterations (the sum of
  running sequences over iterations) and ``P`` prompt tokens, all read off the replayed step. Fitting
  these rather than "tokens/s at N running" keeps long-tail steps right: the slowest sequence sets
  ``I``, not the mean one;
- update and sync: ``fixed + per_token x generated tokens (+ per_sequence x rollouts, when the runs'
  tokens per rollout vary enough to tell the two apart)``, the update's variable part scaled by
  ``(ref/u)**beta`` with the trainer's cores ``u``;
- scoring in the loop: the factor between the scoring phase the loop measured and the scorer busy
  time the benchmarked latency model gives for the same batches (``in_loop_factor``), plus a cost
  per scoring call (``call_overhead_s``);
- contention (runs overlapped on shared cores): the ``gen_slowdown`` and ``score_slowdown`` whose
  simulation best matches the measured generate phase and step time, found on a coarse grid over
  0..3 refined to 0.05 around its best point.

Residuals are relative; with a single unit count an exponent is assumed 1.0 and marked unmeasured.
Steps more than ``SLOW_OUTLIER`` slower than a first fit are dropped and the fit repeated once: on
a shared machine other programs only ever slow a step down (``fit_scaled_trimmed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import ValidationError

from rlsim.errors import RlsimError
from rlsim.planner.measure.loop_results import LoopSteps, drop_disturbed, parse_loop_steps, read_json
from rlsim.planner.measure.loop_runner import step_loads
from rlsim.planner.profile.fitting import EXPONENT_GRID, SLOW_OUTLIER, fit_scaled, fit_stats, nonneg_lstsq
from rlsim.planner.profile.schema import (
    ContentionEntry,
    ContentionModel,
    Device,
    GenerationModel,
    GenerationPoint,
    Profile,
    TrainerModel,
)
from rlsim.planner.sim.generation import generation_features
from rlsim.planner.validate.predict import loop_trace, predict_trace
from rlsim.schedule_kinds import schedule_kind

if TYPE_CHECKING:
    from rlsim.loop.config import RunConfig

# Slowdowns searched, fractions (1.0 = twice as long). Up to 6: a fit to one overlapped config once sat at the
# old bound (3.25 after the fine pass), so the bound and not the runs chose it; CONTENTION_BOUND names a fit on it.
# Steps of 0.25 to 3 (the score slowdown moves a step little, so a coarser grid there can settle in the wrong
# place) and of 0.5 beyond, which the fine pass (+-0.25) still covers without a gap: 19 x 19 trials, not 25 x 25.
_COARSE = np.round(np.concatenate([np.arange(0.0, 3.0001, 0.25), np.arange(3.5, 6.0001, 0.5)]), 3).tolist()
_FINE = np.round(np.arange(-0.25, 0.2501, 0.05), 3).tolist()
CONTENTION_BOUND = _COARSE[-1] + _FINE[-1]
CONTENTION_PHASES = ("generate", "score")  # what fit_contention matches (see there)


@dataclass(frozen=True)
class CalibrationRun:
    """One loop run: its config, measured steps, the cores each role had and every step's lengths."""

    path: Path
    config: RunConfig
    steps: LoopSteps
    rollout_units: float
    trainer_units: float
    trace: list[tuple[list[int], list[int]]]

    @property
    def contended(self) -> bool:
        """Generation shared its cores with scoring while both ran."""
        return self.config.placement.preset == "shared" and schedule_kind(self.config.schedule).streams


def read_calibration_run(path: Path, skip_first: int = 1, disturbed_above: float | None = None) -> CalibrationRun:
    """Parse a results.json of ``rlsim run`` with a synthetic workload; RlsimError otherwise.

    ``disturbed_above``: leave out steps during which other programs took more than this share of
    the cores, as recorded beside the results by ``RealLoopRunner`` (see ``drop_disturbed``).
    """
    from rlsim.loop.config import RunConfig

    data = read_json(path)
    steps, _ = drop_disturbed(parse_loop_steps(data, path, skip_first), step_loads(path.parent), disturbed_above)
    try:
        config = RunConfig.model_validate(data["config"])
        cores = {role: len(data["placement"][role]["cores"]) for role in ("rollout", "trainer")}
    except (KeyError, TypeError, ValidationError):
        raise RlsimError(
            f"{path} lacks a valid config or placement; it must be a results.json of this rlsim's `rlsim run`"
        ) from None
    if config.workload.spec.path is not None:
        raise RlsimError(f"{path} ran a file workload; calibrate on synthetic workloads, whose lengths are known")
    if schedule_kind(
        config.schedule
    ).pipelined:  # a step there is not one batch's phases: generation of later batches runs in it
        raise RlsimError(
            f"{path} ran schedule async, whose steps mix batches; calibrate on sequential or overlapped runs "
            "and check async plans with `rlsim plan validate configs/validate_cpu_async.yaml`"
        )
    trace = loop_trace(config, steps.numbers)
    if steps.tokens is not None and any(sum(r) != t for (_, r), t in zip(trace, steps.tokens, strict=True)):
        # The replayed lengths must be what ran: a config edited after the run would fit nonsense.
        raise RlsimError(
            f"{path}: the lengths its config draws do not add up to the tokens it generated; "
            "it was not written by this config (re-run it)"
        )
    return CalibrationRun(path, config, steps, float(cores["rollout"]), float(cores["trainer"]), trace)


def fit_generation(runs: list[CalibrationRun], device: Device, max_running: int) -> GenerationModel:
    """Fit the engine model to every measured step of the uncontended ``runs`` (see the module doc)."""
    rows, target, units, points = [], [], [], []
    for run in (r for r in runs if not r.contended):
        for (prompts, responses), gen_s in zip(run.trace, run.steps.time_s["generate"], strict=True):
            rows.append(generation_features(np.asarray(prompts), np.asarray(responses), 1, max_running))
            target.append(float(gen_s))
            units.append(run.rollout_units)
        points.append(
            GenerationPoint(
                running=float(min(len(run.trace[0][1]), max_running)),
                units=run.rollout_units,
                tokens_per_s=float(
                    np.median([sum(r) / g for (_, r), g in zip(run.trace, run.steps.time_s["generate"], strict=True)])
                ),
                source=str(run.path),
            )
        )
    if len({len(r) for r in (run.trace[0][1] for run in runs if not run.contended)}) < 2:
        raise RlsimError(
            "generation needs uncontended (sequential or split) runs at two or more concurrencies; "
            "add entries with other prompts_per_step x group_size to the calibration set"
        )
    x, y, u = np.array(rows), np.array(target), np.array(units)
    ref = float(max(u))
    several = len(set(units)) > 1
    best = None
    # With several core counts the fixed part of an iteration gets its own exponent (searched here;
    # the per-sequence one inside fit_scaled_trimmed), judged by a loss that caps disturbed steps.
    for base_exp in EXPONENT_GRID[::2] if several else [None]:
        base_col = x[:, 0] * (ref / u) ** (base_exp if base_exp is not None else 0.0)
        if base_exp is None:
            coef, alpha, keep = fit_scaled_trimmed(x[:, :2], x[:, 2:], y, u, ref)
            predicted = (coef[0] * x[:, 0] + coef[1] * x[:, 1]) * (ref / u) ** alpha + coef[2] * x[:, 2]
            coef = np.array([coef[0], coef[1], coef[2]])
        else:
            sub, alpha, keep = fit_scaled_trimmed(x[:, 1:2], np.column_stack([base_col, x[:, 2]]), y, u, ref)
            coef = np.array([sub[1], sub[0], sub[2]])  # base, per_seq, prefill
            predicted = coef[0] * base_col + coef[1] * x[:, 1] * (ref / u) ** alpha + coef[2] * x[:, 2]
        loss = float(np.sum(np.minimum((y / predicted - 1.0) ** 2, SLOW_OUTLIER**2)))
        if best is None or loss < best[0] - 1e-12:
            best = (loss, coef, alpha, None if base_exp is None else float(base_exp), keep, predicted)
    assert best is not None
    _, coef, alpha, base_exp, keep, predicted = best
    return GenerationModel(
        device=device,
        units=ref,
        base_s=float(coef[0]),
        per_seq_s=float(coef[1]),
        prefill_s_per_token=float(coef[2]),
        unit_exponent=alpha,
        base_exponent=base_exp,
        unit_exponent_measured=several,
        max_running=max_running,
        fit=fit_stats(y[keep], predicted[keep]),
        points=points,
    )


def fit_scaled_trimmed(
    scaled: np.ndarray, fixed: np.ndarray, y: np.ndarray, units: np.ndarray, ref: float
) -> tuple[np.ndarray, float, np.ndarray]:
    """``y = (scaled @ p) x (ref/units)**e + fixed @ q`` (p, q >= 0), relative residuals, then refitted
    without the steps more than ``SLOW_OUTLIER`` slower than that first fit.

    Other programs on the same cores only ever slow a step down, so a step far above the fit is
    taken as disturbed rather than as information (the kept mask says which steps were used).
    Shapes: scaled (n, ks), fixed (n, kf), y and units (n,). Returns (p then q, e, kept mask).
    """
    keep = np.ones(len(y), dtype=bool)
    for _ in range(2):
        search = len(set(units.tolist())) > 1
        fixed_first, exponent, _ = fit_scaled(fixed[keep], scaled[keep], y[keep], units[keep], ref, search)
        coef = np.concatenate([fixed_first[fixed.shape[1] :], fixed_first[: fixed.shape[1]]])  # p then q
        predicted = (scaled @ coef[: scaled.shape[1]]) * (ref / units) ** exponent + fixed @ coef[scaled.shape[1] :]
        slow = y / np.maximum(predicted, 1e-12) - 1.0 > SLOW_OUTLIER
        if not slow.any() or (~slow).sum() < scaled.shape[1] + fixed.shape[1] + 1:
            break
        keep = ~slow
    return coef, exponent, keep


def fit_trainer(runs: list[CalibrationRun]) -> TrainerModel:
    """Update and sync seconds against generated tokens over every measured step of ``runs``."""
    tokens = np.concatenate([r.steps.tokens for r in runs if r.steps.tokens is not None])
    if tokens.size == 0:
        raise RlsimError("no calibration run has generated-token counts; cannot fit the update cost per token")
    with_tokens = [r for r in runs if r.steps.tokens is not None]
    units = np.concatenate([np.full(len(r.steps.tokens), r.trainer_units) for r in with_tokens])  # type: ignore[arg-type]
    update = np.concatenate([r.steps.time_s["update"] for r in with_tokens])
    sync = np.concatenate([r.steps.time_s["sync"] for r in with_tokens])
    sequences = np.concatenate([r.steps.rollouts for r in with_tokens])
    ref = float(max(units))
    # Tokens per rollout must vary for the per-sequence part to be told apart from the per-token one.
    per_rollout = tokens / sequences
    varied = per_rollout.max() > 1.25 * per_rollout.min()
    scaled = np.column_stack([tokens, sequences]) if varied else tokens[:, None]
    up, beta, _ = fit_scaled_trimmed(scaled, np.ones((len(tokens), 1)), update, units, ref)
    per_token, per_seq, fixed = (up[0], up[1], up[2]) if varied else (up[0], 0.0, up[1])
    sync_coef = nonneg_lstsq(np.column_stack([np.ones_like(tokens), tokens]), sync)
    idle = np.concatenate([r.steps.time_s["idle"] for r in runs])
    return TrainerModel(
        units=ref,
        update_fixed_s=float(fixed),
        update_s_per_token=float(per_token),
        update_s_per_sequence=float(per_seq),
        unit_exponent=beta,
        sync_fixed_s=float(sync_coef[0]),
        sync_s_per_token=float(sync_coef[1]),
        step_overhead_s=float(np.mean(idle)),
    )


def fit_score_factors(runs: list[CalibrationRun], profile: Profile) -> dict[str, tuple[float, float]]:
    """Per runtime run uncontended in ``runs``: ``(in_loop_factor, call_overhead_s)`` fitted to
    ``measured scoring phase = factor x simulated scorer busy time + overhead x calls`` over the steps
    (relative residuals; steps far slower than a first fit left out, see ``fit_scaled_trimmed``).

    ``profile`` needs the runtimes (their factors are ignored), generation and trainer models.
    """
    plain = {
        k: m.model_copy(update={"in_loop_factor": 1.0, "call_overhead_s": 0.0}) for k, m in profile.runtimes.items()
    }
    rows: dict[str, list[tuple[float, float, float]]] = {}
    for run in runs:
        runtime = run.config.reward.runtime
        if run.contended or runtime not in profile.runtimes:
            continue
        steps = predict_trace(run.config, profile.model_copy(update={"runtimes": plain}), run.trace).steps
        for predicted, measured in zip(steps, run.steps.time_s["score"], strict=True):
            if predicted.time_s["score"] > 0:
                calls = _score_calls(run.config, predicted.rollouts)
                rows.setdefault(runtime, []).append((predicted.time_s["score"], float(calls), float(measured)))
    out = {}
    for runtime, values in rows.items():
        x = np.array(values)
        ones = np.ones(len(x))
        if len(x) >= 3:  # two unknowns and a trimming pass need a few steps
            coef, _, _ = fit_scaled_trimmed(x[:, :2], np.zeros((len(x), 0)), x[:, 2], ones, 1.0)
            out[runtime] = (float(coef[0]), float(coef[1]))
        else:
            out[runtime] = (float(np.median(x[:, 2] / x[:, 0])), 0.0)
    return out


def _score_calls(config: RunConfig, rollouts: int) -> int:
    """Scorer calls the loop makes in a step: one per micro-batch, or one per busy replica."""
    if schedule_kind(config.schedule).streams:
        return -(-rollouts // config.micro_batch)
    return min(config.reward.replicas, rollouts)


def fit_contention(runs: list[CalibrationRun], profile: Profile) -> ContentionModel | None:
    """Slowdowns that make the simulation of the contended ``runs`` match them (None without such runs).

    ``profile`` must already hold the generation, trainer and scorer models. Per runtime seen, a grid
    search minimises the squared relative errors of the median generate and score phases over every
    contended run of that runtime (the calibration set's overlapped shared configs), slowdowns 0 to
    ``CONTENTION_BOUND``. Those are the phases contention moves. The step time is not matched: its other
    phases (update, sync) are the trainer model's, which contention cannot move, and matching it made the
    slowdowns absorb the trainer's miss (on the 2026-12-07 AMD profile's runs, an update phase 15% longer than
    its model pushed the score slowdown to the bound, +625%, scoring 3.0 s where the loop measured 2.2 s).
    """
    contended = [r for r in runs if r.contended]
    if not contended:
        return None
    per_runtime: dict[str, ContentionEntry] = {}
    for runtime in sorted({r.config.reward.runtime for r in contended}):
        mine = [r for r in contended if r.config.reward.runtime == runtime]

        def error(g: float, s: float, mine: list[CalibrationRun] = mine) -> float:
            entry = ContentionEntry(gen_slowdown=g, score_slowdown=s)
            trial = profile.model_copy(update={"contention": ContentionModel(default=entry)})
            err = 0.0
            for run in mine:
                steps = predict_trace(run.config, trial, run.trace).steps
                for phase in CONTENTION_PHASES:
                    predicted = np.median([st.time_s[phase] for st in steps])
                    err += (predicted / np.median(run.steps.time_s[phase]) - 1.0) ** 2
            return err

        # A coarse grid over 0..3, then a fine one around its best point.
        g, s = min(((g, s) for g in _COARSE for s in _COARSE), key=lambda gs: error(*gs))
        fine = [(round(g + dg, 3), round(s + ds, 3)) for dg in _FINE for ds in _FINE if g + dg >= 0 and s + ds >= 0]
        g, s = min(fine, key=lambda gs: error(*gs))
        per_runtime[runtime] = ContentionEntry(gen_slowdown=g, score_slowdown=s)
    worst = ContentionEntry(
        gen_slowdown=max(e.gen_slowdown for e in per_runtime.values()),
        score_slowdown=max(e.score_slowdown for e in per_runtime.values()),
    )
    return ContentionModel(default=worst, per_runtime=per_runtime)
