"""Fit a planner profile to the steps of a framework's log (``rlsim profile --from-log FILE``).

A logged step gives aggregates, not each rollout's length, so every step is replayed as a trace the
planner can simulate: ``rollouts`` rollouts of the mean prompt length, one response of the logged
maximum and the others sharing the rest of ``rollouts x mean`` response tokens (all of the mean when
the maximum is not logged). The fits then use the same features the simulation computes on that
trace, so the fitted profile reproduces the logged phases exactly up to the least-squares residual:

- generation on ``engines`` engines of ``engine_gpus`` GPUs (``gpus / engine_gpus``, as the run had):
  ``gen_s = fixed + base x I + per_seq x S + prefill x P`` with ``I`` decode iterations, ``S``
  sequence-iterations and ``P`` prompt tokens of the slowest engine (every rollout admitted at once:
  ``max_running`` is set above the largest step). ``fixed`` is what a generation call costs whatever
  it generates (waking the engines, the weight sync of verl before 0.7.1); without it, fixed costs land
  on whichever feature barely varies. The planner's generation model has no per-call term, so
  ``fixed`` is carried in ``step_overhead_s`` (the same time in the sequential schedule these
  profiles are for);
- scoring as one batch per step on one replica: ``score_s = a + c x padded tokens`` (runtime ``logged``);
- update ``fixed + per_token x response tokens``, sync ``fixed + per_token x response tokens``, and the
  rest of each logged step (everything the frameworks time outside these phases) as the mean overhead
  (the mean, not the median: a run's total is a sum). Validation and checkpoint phases are left out of
  the per-step fit and added to a whole run's total as logged (``run_total``).

The profile is for that layout: plan with ``placement: {schedule: sequential, colocated: true, runtime:
logged, batcher: {kind: fixed, batch_size: >= rollouts}}`` on ``gpus`` GPUs (``plan_placement``).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

import rlsim
from rlsim.errors import RlsimError
from rlsim.planner.profile.fitting import fit_stats, nonneg_lstsq
from rlsim.planner.profile.fitting.loops import fit_scaled_trimmed
from rlsim.planner.profile.logs.frameworks import LogFormat, LoggedStep
from rlsim.planner.profile.schema import (
    SCHEMA_VERSION,
    ContentionEntry,
    ContentionModel,
    FitStats,
    GenerationModel,
    Profile,
    ScorerLatencyModel,
    TrainerModel,
)
from rlsim.planner.sim.evaluate import evaluate
from rlsim.planner.sim.generation import generation_features
from rlsim.planner.spec.cluster import NodeSpec, PlacementSpec
from rlsim.planner.validate.predict import ReplayWorkload
from rlsim.workloads import FixedLengths

RUNTIME = "logged"
_NO_TRUNCATION = 1_000_000  # the reward phase is fitted on whole sequences


@dataclass(frozen=True)
class LogLayout:
    """The logged run's GPUs (one node) and GPUs per generation engine."""

    gpus: int = 8
    engine_gpus: int = 1

    @property
    def engines(self) -> int:
        return self.gpus // self.engine_gpus


def step_trace(step: LoggedStep) -> tuple[list[int], list[int]]:
    """Prompt and response lengths of one replayed step (see the module docstring); longest first."""
    n = step.rollouts
    total = round(n * step.response_mean)
    # Rounding can put the logged maximum just under the mean of the rounded total: never below it.
    longest = max(round(step.response_max), -(-total // n))
    rest = total - longest
    if rest < 0 or step.response_max < step.response_mean:
        raise RlsimError(
            f"line {step.line}: response lengths are inconsistent (mean {step.response_mean:g}, "
            f"max {step.response_max:g} over {n} rollouts)"
        )
    q, r = divmod(rest, n - 1) if n > 1 else (0, 0)
    responses = [longest] + [q + 1] * r + [q] * (n - 1 - r)
    return [round(step.prompt_mean)] * n, responses[:n]


_NO_FIT = FitStats(n_samples=0, r2=0.0, residual_rel_std=0.0, residual_rel_max=0.0)


def fit_log_profile(
    fmt: LogFormat, steps: list[LoggedStep], layout: LogLayout, hardware_kind: str, notes: list[str]
) -> Profile:
    """A profile whose generation, scoring, update, sync and overhead are fitted to ``steps``."""
    if len(steps) < 3:
        raise RlsimError(f"the log has {len(steps)} step line(s); fitting needs 3 or more steps")
    if layout.gpus % layout.engine_gpus:
        raise RlsimError(f"--gpus {layout.gpus} is not a multiple of --engine-gpus {layout.engine_gpus}")
    traces = [step_trace(s) for s in steps]
    max_running = max(1024, max(s.rollouts for s in steps))
    gen, gen_fixed = _fit_generation(steps, traces, layout, max_running)
    tokens = np.array([sum(r) for _, r in traces], dtype=float)
    update_coef, _, _ = fit_scaled_trimmed(
        tokens[:, None],
        np.ones((len(steps), 1)),
        _positive([s.update_s for s in steps], "update"),
        np.ones(len(steps)),
        1.0,
    )
    sync = np.array([s.sync_s for s in steps])
    sync_coef = nonneg_lstsq(np.column_stack([np.ones_like(tokens), tokens]), sync)
    trainer = TrainerModel(
        units=float(layout.gpus),
        update_s_per_token=float(update_coef[0]),
        update_fixed_s=float(update_coef[1]),
        sync_fixed_s=float(sync_coef[0]),
        sync_s_per_token=float(sync_coef[1]),
        step_overhead_s=_overhead(steps, gen_fixed),
    )
    unmeasured = ["contention: none (the frameworks log sequential phases; gen and score slowdowns set to 0)"]
    if fmt.name == "openrlhf":
        unmeasured.append(
            "prompt lengths and the longest response (OpenRLHF logs neither): prompts counted as 0 "
            "tokens, every response as the mean"
        )
    return Profile(
        rlsim_version=rlsim.__version__,
        schema_version=SCHEMA_VERSION,
        hardware_kind=hardware_kind,
        illustrative=False,
        notes=[
            *notes,
            f"fitted to {len(steps)} steps of a {fmt.name} log ({fmt.source}) on {layout.gpus} GPUs, "
            f"{layout.engines} engine(s) of {layout.engine_gpus} GPU(s); plan with runtime {RUNTIME!r}, "
            "schedule sequential, colocated",
            f"generation's fixed per-step term {gen_fixed:.4g} s is carried in trainer.step_overhead_s",
            fitted_range_note(steps),
        ],
        unmeasured=unmeasured,
        runtimes={RUNTIME: _fit_scorer(steps, traces, layout)},
        generation=gen,
        trainer=trainer,
        contention=ContentionModel(default=ContentionEntry(gen_slowdown=0.0, score_slowdown=0.0)),
    )


def _positive(values: list[float], what: str) -> np.ndarray:
    out = np.array(values, dtype=float)
    if np.any(out <= 0):
        raise RlsimError(f"every step needs a positive {what} time to fit its cost; the log has a zero or negative one")
    return out


def generation_design(steps: list[LoggedStep], layout: LogLayout, max_running: int) -> np.ndarray:
    """Per step ``(I, S, P, 1)``: the generation features of the slowest engine and the fixed term."""
    x = np.array([_step_features(s, layout.engines, max_running) for s in steps])
    return np.column_stack([x, np.ones(len(steps))])


@functools.lru_cache(maxsize=65536)
def _step_features(step: LoggedStep, engines: int, max_running: int) -> tuple[float, float, float]:
    # Cached: the fit, its warnings and the held-out fit all need them (a 10 MB log has ~2,500 steps).
    # Engine 0 holds the longest rollout and at least as many rollouts and tokens as any other (the trace puts the
    # longest first and deal() gives the first engines the remainder), so it is the slowest under any coefficients.
    prompts, responses = step_trace(step)
    return generation_features(np.asarray(prompts), np.asarray(responses), engines, max_running)


def _fit_generation(
    steps: list[LoggedStep], traces: list[tuple[list[int], list[int]]], layout: LogLayout, max_running: int
) -> tuple[GenerationModel, float]:
    """The generation model and its fixed per-step term (seconds)."""
    x = generation_design(steps, layout, max_running)
    y = _positive([s.gen_s for s in steps], "generation")
    if len(np.unique(x[:, 1])) < 2:
        raise RlsimError(
            "every logged step generated the same tokens; generation's fixed and per-sequence costs "
            "cannot be told apart (give a log whose response lengths vary)"
        )
    coef, _, keep = fit_scaled_trimmed(x[:, :2], x[:, 2:], y, np.ones(len(y)), 1.0)
    predicted = x @ coef
    model = GenerationModel(
        device="cuda",
        units=float(layout.engine_gpus),
        base_s=float(coef[0]),
        per_seq_s=float(coef[1]),
        prefill_s_per_token=float(coef[2]),
        max_running=max_running,
        fit=fit_stats(y[keep], predicted[keep]),
    )
    return model, float(coef[3])


def fit_warnings(steps: list[LoggedStep], layout: LogLayout) -> list[str]:
    """Warnings about the generation fit: too few steps per parameter, or features that move together."""
    x = generation_design(steps, layout, max(1024, max(s.rollouts for s in steps)))
    out = []
    if len(steps) < 3 * x.shape[1]:
        out.append(
            f"generation: {x.shape[1]} parameters fitted to {len(steps)} steps; the in-sample error flatters "
            "the fit: trust the held-out error"
        )
    used = x[:, np.abs(x).max(axis=0) > 0]  # OpenRLHF's prompts are 0 tokens: no column to fit
    scaled = used / np.abs(used).max(axis=0)
    cond = float(np.linalg.cond(scaled))
    if not math.isfinite(cond) or cond > 1e3:
        out.append(
            f"generation: the logged steps vary too little to tell its costs apart (condition number {cond:.3g}); "
            "the fit reproduces this workload but may not others: give a log whose lengths vary more"
        )
    return out


def fitted_range_note(steps: list[LoggedStep]) -> str:
    """The note a log-fitted profile keeps of the lengths it saw (``extrapolation`` reads it back)."""
    return (
        f"fitted range: response_length/mean {min(s.response_mean for s in steps):g}.."
        f"{max(s.response_mean for s in steps):g}, response_length/max {max(s.response_max for s in steps):g}, "
        f"rollouts {min(s.rollouts for s in steps)}..{max(s.rollouts for s in steps)}"
    )


_RANGE = re.compile(
    r"^fitted range: response_length/mean ([\d.e+-]+)\.\.([\d.e+-]+), "
    r"response_length/max ([\d.e+-]+), rollouts (\d+)\.\.(\d+)$"
)


def extrapolation(profile: Profile, response_means: list[float], response_max: float, rollouts: int) -> str | None:
    """A warning when a workload goes beyond the lengths or rollouts a log-fitted profile saw (None if not)."""
    for note in profile.notes:
        m = _RANGE.match(note)
        if not m:
            continue
        lo, hi, mx, rlo, rhi = (float(g) for g in m.groups())
        beyond = []
        if min(response_means) < 0.8 * lo or max(response_means) > 1.25 * hi:
            beyond.append(
                f"mean response {min(response_means):g}..{max(response_means):g} tokens (fitted {lo:g}..{hi:g})"
            )
        if response_max > 1.25 * mx:
            beyond.append(f"longest response {response_max:g} tokens (fitted up to {mx:g})")
        if rollouts > 1.25 * rhi or rollouts < 0.8 * rlo:
            beyond.append(f"{rollouts} rollouts per step (fitted {rlo:g}..{rhi:g})")
        if beyond:
            return "extrapolating beyond the fitted log: " + "; ".join(beyond) + " (the prediction is less certain)"
    return None


def _fit_scorer(
    steps: list[LoggedStep], traces: list[tuple[list[int], list[int]]], layout: LogLayout
) -> ScorerLatencyModel:
    """One batch per step: ``score_s = a + c x rollouts x longest (prompt + response)``."""
    y = np.array([s.score_s for s in steps], dtype=float)
    padded = np.array([len(r) * max(p[i] + r[i] for i in range(len(r))) for p, r in traces], dtype=float)
    coef = nonneg_lstsq(np.column_stack([np.ones_like(padded), padded]), y)
    fit = fit_stats(y, coef[0] + coef[1] * padded) if np.all(y > 0) else _NO_FIT
    return ScorerLatencyModel(
        device="cuda",
        units=float(layout.gpus),
        intercept_s=float(coef[0]),
        per_sequence_s=0.0,
        per_padded_token_s=float(coef[1]),
        max_length=_NO_TRUNCATION,
        fit=fit,
    )


def _overhead(steps: list[LoggedStep], gen_fixed: float) -> float:
    """Mean seconds of each step outside its fitted phases (validation and checkpoint left out), plus
    generation's fixed term."""
    rest = [s.train_s - s.gen_s - s.score_s - s.update_s - s.sync_s for s in steps]
    return max(0.0, float(np.mean(rest))) + gen_fixed


def plan_placement(max_rollouts: int) -> dict[str, object]:
    """The ``placement`` of a plan YAML that simulates steps as the logged run ran them."""
    return {
        "schedule": "sequential",
        "colocated": True,
        "runtime": RUNTIME,
        "dispatch": "pull",
        "batcher": {"kind": "fixed", "batch_size": max_rollouts},
    }


def replay_steps(profile: Profile, steps: list[LoggedStep], layout: LogLayout) -> list[float]:
    """Simulated step time (s) of each logged step under ``profile`` (no noise), for checking a fit."""
    return [t["total"] for t in replay_phases(profile, steps, layout)]


def generation_fixed_s(profile: Profile) -> float:
    """The generation fixed per-step term a log-fitted profile carries in its step overhead (0 if none)."""
    for note in profile.notes:
        m = re.match(r"^generation's fixed per-step term ([\d.e+-]+) s is carried", note)
        if m:
            return float(m.group(1))
    return 0.0


def replay_phases(profile: Profile, steps: list[LoggedStep], layout: LogLayout) -> list[dict[str, float]]:
    """Per logged step the simulated seconds of each phase (``sim/step.py``'s ``time_s``: ``generate``,
    ``score_tail``, ``update``, ``sync``, ``idle``, ``total``)."""
    traces = [step_trace(s) for s in steps]
    node = NodeSpec(count=1, cores=max(1, layout.gpus), gpus=layout.gpus, kind=profile.hardware_kind)
    spec = PlacementSpec.model_validate(plan_placement(max(s.rollouts for s in steps)))
    groups: dict[int, list[int]] = {}  # one evaluation per rollout count (a workload has one), in log order
    for i, trace in enumerate(traces):
        groups.setdefault(len(trace[1]), []).append(i)
    out: list[dict[str, float]] = [{} for _ in traces]
    for rollouts, index in groups.items():
        group = [traces[i] for i in index]
        workload = ReplayWorkload(prompts_per_step=rollouts, response_tokens=FixedLengths(tokens=1), trace=group)
        ev = evaluate(node, profile, workload, spec, steps=len(index), noise=False)
        for i, result in zip(index, ev.steps, strict=True):
            out[i] = {k: float(v) for k, v in result.time_s.items()}
    return out
