"""The steps of ``rlsim profile`` that turn calibration loop runs into profile sections.

Each wraps a fit of ``calibrate`` and says what it found (or why it could not) in one line of
``measured`` / ``unmeasured``, which ``rlsim profile`` prints and keeps in the profile's notes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.planner.measure.roles import measure_roles, measure_sharing
from rlsim.planner.profile.fitting import fit_latency_model, fit_update_model
from rlsim.planner.profile.fitting.loops import (
    CONTENTION_BOUND,
    CalibrationRun,
    fit_contention,
    fit_generation,
    fit_score_factors,
    fit_trainer,
)
from rlsim.planner.profile.schema import (
    ContentionEntry,
    ContentionModel,
    Device,
    GenerationModel,
    LatencySample,
    Profile,
    RolesModel,
    ScorerLatencyModel,
    TrainerModel,
    nearest_threads,
    new_profile_header,
)

if TYPE_CHECKING:
    from rlsim.planner.measure.loop_set import QuietGate
    from rlsim.planner.measure.roles import RolesGrid


def calibrated_models(
    runs: list[CalibrationRun], device: Device, max_running: int, measured: list[str], unmeasured: list[str]
) -> tuple[GenerationModel | None, TrainerModel | None]:
    """The generation and trainer models fitted to ``runs``; a line per result in ``measured``/``unmeasured``."""
    generation = trainer = None
    try:
        generation = fit_generation(runs, device, max_running)
        measured.append(
            f"generation model from {generation.fit.n_samples} loop steps of "
            f"{sum(not r.contended for r in runs)} run(s) (R^2 {generation.fit.r2:.3f}, "
            f"residual {generation.fit.residual_rel_std:.1%}, core exponent {generation.unit_exponent:g}"
            f"{'' if generation.unit_exponent_measured else ' assumed'})"
        )
    except RlsimError as err:
        unmeasured.append(f"generation: {err}")
    try:
        trainer = fit_trainer(runs)
        measured.append(
            f"update/sync cost per token and step overhead ({len(runs)} run(s), core exponent "
            f"{trainer.unit_exponent:g})"
        )
    except RlsimError as err:
        unmeasured.append(f"trainer: {err}")
    return generation, trainer


def with_in_loop_factors(
    runs: list[CalibrationRun],
    runtimes: dict[str, ScorerLatencyModel],
    generation: GenerationModel,
    trainer: TrainerModel,
    measured: list[str],
    unmeasured: list[str],
) -> dict[str, ScorerLatencyModel]:
    """Each runtime's ``in_loop_factor`` from the loop runs that used it; the others get their median."""
    # Only uncontended runs are used, so the (not yet fitted) contention is irrelevant: none.
    none = ContentionModel(default=ContentionEntry(gen_slowdown=0.0, score_slowdown=0.0))
    partial = Profile(
        **new_profile_header("calibrating", illustrative=False),
        runtimes=runtimes,
        generation=generation,
        trainer=trainer,
        contention=none,
    )
    factors = fit_score_factors(runs, partial)
    if not factors:
        return runtimes
    assumed = tuple(float(np.median([f[i] for f in factors.values()])) for i in range(2))
    out = {}
    for name, model in runtimes.items():
        factor, overhead = factors.get(name, assumed)
        out[name] = model.model_copy(
            update={"in_loop_factor": factor, "call_overhead_s": overhead, "in_loop_factor_measured": name in factors}
        )
        if name in factors:
            measured.append(
                f"runtime {name}: scoring in the loop takes {factor:.2f}x its benchmarked latency "
                f"+ {overhead * 1000:.0f} ms per call"
            )
        else:
            unmeasured.append(
                f"runtime {name}: in-loop factor not measured (no loop run used it); assumed "
                f"{factor:.2f}x + {overhead * 1000:.0f} ms per call like {', '.join(sorted(factors))}"
            )
    return out


def loop_contention(
    runs: list[CalibrationRun],
    runtimes: dict[str, ScorerLatencyModel],
    generation: GenerationModel,
    trainer: TrainerModel,
    measured_file: ContentionModel | None,
    measured: list[str],
    unmeasured: list[str],
) -> ContentionModel | None:
    """Slowdowns fitted to the overlapped shared runs, beside (and over) those of the experiment file."""
    usable = [r for r in runs if not r.contended or r.config.reward.runtime in runtimes]
    partial = Profile(
        **new_profile_header("calibrating", illustrative=False),
        runtimes=runtimes,
        generation=generation,
        trainer=trainer,
        contention=measured_file,
    )
    fitted = fit_contention(usable, partial)
    if fitted is None:
        return measured_file
    unmeasured[:] = [u for u in unmeasured if not u.startswith("contention: no contention_results")]
    configs = sorted({r.path.parent.name or str(r.path) for r in usable if r.contended})
    measured.append(
        f"contention fitted to overlapped shared loop runs ({', '.join(configs)}) for "
        + ", ".join(
            f"{k} (gen +{v.gen_slowdown:.0%}, score +{v.score_slowdown:.0%}{bound_note(v)})"
            for k, v in sorted(fitted.per_runtime.items())
        )
    )
    per_runtime = {**(measured_file.per_runtime if measured_file else {}), **fitted.per_runtime}
    worst = ContentionEntry(
        gen_slowdown=max(e.gen_slowdown for e in per_runtime.values()),
        score_slowdown=max(e.score_slowdown for e in per_runtime.values()),
    )
    return ContentionModel(default=worst, per_runtime=per_runtime)


def roles_section(
    grid: RolesGrid | None,
    measure: bool,
    stored: Profile | None,
    disturbed_above: float | None,
    measured: list[str],
    unmeasured: list[str],
    on_cell: Callable[[str], None] | None = None,
    quiet: QuietGate | None = None,
) -> RolesModel | None:
    """The ``roles`` section: timed now (``measure.roles``), or re-fitted from the samples a measured
    ``stored`` profile keeps (``--scorers-from``; its sharing efficiency measured now when it has none per
    thread count); None, with the reason, when neither is possible."""
    if grid is None:
        unmeasured.append("roles (PPO's reference and critic): no roles section in the profile config")
        return None

    sharing: dict[str, Any] = {}  # RolesModel's sharing fields; none: assumed 1
    optimizer: dict[str, dict[int, float]] = {}
    if stored is not None and stored.roles is not None and not stored.illustrative:
        old = stored.roles
        samples: dict[str, list[LatencySample]] = {f"reference:{k}": m.samples for k, m in old.reference.items()}
        samples.update(values=old.values.samples, update_critic=old.update_critic.samples)
        where, micro_batch = f"re-fitted from the {stored.hardware_kind} profile", old.micro_batch
        context = old.values.max_length
        if old.sharing_efficiency_by_threads or not (measure and grid.sharing):
            sharing = old.model_dump(include={"sharing_efficiency", "sharing_efficiency_measured"})
            sharing["sharing_efficiency_by_threads"] = dict(old.sharing_efficiency_by_threads)
        else:  # stored before it was measured per thread count: measure that part now (~30 s per count)
            sharing = _sharing_fields(measure_sharing(grid, quiet))
            where += "; sharing efficiency measured now"
        optimizer = {role: dict(v) for role, v in old.optimizer_step_s.items()}
        if old.update_actor is not None:
            samples["update_actor"] = list(old.update_actor.samples)
        elif measure:  # stored before the actor's update was timed: time it and its optimizer step now
            now = measure_roles(grid, on_cell, quiet, only=("update_actor",))
            samples["update_actor"], optimizer = now.samples["update_actor"], _medians(now.optimizer)
            where += "; the actor's update and its optimizer step timed now"
    elif measure:
        timed = measure_roles(grid, on_cell, quiet)
        samples, context, optimizer = timed.samples, timed.context, _medians(timed.optimizer)
        where, micro_batch = f"timed on {grid.policy}", grid.micro_batch
        sharing = _sharing_fields(measure_sharing(grid, quiet)) if grid.sharing else {}
    else:
        unmeasured.append("roles (PPO's reference and critic): timing skipped (--no-scorers)")
        return None
    actor_rows = samples.pop("update_actor", None)
    fits = {key: fit_latency_model(rows, "cpu", context, disturbed_above) for key, rows in samples.items()}
    update_actor = None
    if actor_rows:
        steps = optimizer.get("actor") or {1: 0.0}
        update_actor = fit_update_model(
            actor_rows,  # type: ignore[arg-type]
            "cpu",
            lambda units: nearest_threads(steps, units),
            disturbed_above,
        )
    roles = RolesModel(
        micro_batch=micro_batch,
        reference={k.split(":", 1)[1]: m for k, m in fits.items() if k.startswith("reference:")},
        values=fits["values"],
        update_critic=fits["update_critic"],
        update_actor=update_actor,
        optimizer_step_s=optimizer,
        **sharing,
    )
    r2 = [m.fit.r2 for m in fits.values()] + ([update_actor.fit.r2] if update_actor else [])
    actor = ", actor update" if update_actor else ""
    measured.append(
        f"roles {where}: reference ({', '.join(sorted(roles.reference))}), critic values and update{actor} "
        f"(lowest R^2 {min(r2):.3f}); in-loop factors assumed 1"
    )
    if not roles.sharing_efficiency_measured:
        unmeasured.append("roles: sharing efficiency assumed 1")
        return roles
    by_threads = sorted(roles.sharing_efficiency_by_threads.items())
    kept = ", ".join(f"{v:.0%} at {k} thread(s) each" for k, v in by_threads) or f"{roles.sharing_efficiency:.0%}"
    measured.append(f"roles: two processes on the same cores keep {kept} of their work rate")
    return roles


def _medians(optimizer: dict[str, dict[int, list[float]]]) -> dict[str, dict[int, float]]:
    """``RolesModel.optimizer_step_s`` from the timed optimizer steps: the median per role and thread count."""
    return {role: {u: statistics.median(xs) for u, xs in by.items()} for role, by in optimizer.items()}


def _sharing_fields(by_threads: dict[int, float]) -> dict[str, Any]:
    """RolesModel's sharing fields from ``measure_sharing``: the headline value at the most threads."""
    return {
        "sharing_efficiency": by_threads[max(by_threads)],
        "sharing_efficiency_measured": True,
        "sharing_efficiency_by_threads": by_threads,
    }


def bound_note(entry: ContentionEntry) -> str:
    """A note where a fitted slowdown sits on the search's upper bound (the runs want more than it allows)."""
    if max(entry.gen_slowdown, entry.score_slowdown) >= CONTENTION_BOUND - 1e-9:
        return f"; at the search bound +{CONTENTION_BOUND:.0%}: the model explains these runs only by more contention"
    return ""
