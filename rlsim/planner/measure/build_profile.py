"""``rlsim profile`` without the command line: measure, fit, and say what could not be measured.

Inputs (``ProfileConfig`` YAML): the runtimes to time on a grid (real scorers), loop runs
(``results.json`` of ``rlsim run`` with the concurrency and cores each ran at) for generation,
update and sync, and the contention experiment's ``results.json``. A section that nothing measured
is left out (or copied from ``--fill-from`` and listed in ``unmeasured``), never invented.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.errors import RlsimError
from rlsim.planner.measure.loop_results import (
    generation_point,
    read_contention,
    read_loop_steps,
    read_run_settings,
    trainer_model,
)
from rlsim.planner.measure.loop_set import QuietGate
from rlsim.planner.measure.rewards import RULE_BASED, RewardTiming, summarise, time_rule_based
from rlsim.planner.measure.roles import RolesGrid
from rlsim.planner.measure.scorers import ScorerGrid, measure_runtime
from rlsim.planner.measure.sections import calibrated_models, loop_contention, roles_section, with_in_loop_factors
from rlsim.planner.profile.fitting import fit_generation_model, fit_latency_model
from rlsim.planner.profile.fitting.loops import CalibrationRun, read_calibration_run
from rlsim.planner.profile.scaling import RewardFunctionModel
from rlsim.planner.profile.schema import (
    ContentionEntry,
    ContentionModel,
    Device,
    GenerationModel,
    GenerationPoint,
    Profile,
    ScorerLatencyModel,
    TrainerModel,
    new_profile_header,
)
from rlsim.scoring import SCORERS


class LoopRun(BaseModel):
    """One ``rlsim run`` results.json and the generation concurrency / units it ran with.

    Left out, they are read from the results.json itself: every rollout of a step is submitted at
    once, so ``running`` = prompts x group size (capped by ``max_running``), and ``units`` = the
    rollout actor's cores.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str
    running: float | None = Field(default=None, gt=0, description="sequences decoded at once")
    units: float | None = Field(default=None, gt=0, description="cores (or GPUs) of the generation engine")


class ProfileConfig(BaseModel):
    """What ``rlsim profile`` measures; paths are relative to the YAML file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    hardware_kind: str
    reward_model: str = "minilm-rm"
    device: Device = "cpu"
    runtimes: list[str] = Field(default_factory=list)
    batch_sizes: list[int] = Field(default=[1, 8, 32], min_length=2)
    lengths: list[int] = Field(default=[32, 128, 256], min_length=2)
    units: list[int] = Field(default=[2], min_length=1, description="scorer threads (cpu) or GPUs to time at")
    repeats: int = Field(default=3, ge=1)
    loop_runs: list[LoopRun] = Field(default_factory=list)
    generation_points: list[GenerationPoint] = Field(default_factory=list)
    generation_device: Device = "cpu"
    max_running: int = Field(default=256, ge=1, description="sequences one engine may hold (max_num_seqs)")
    trainer_units: float = Field(default=2, gt=0)
    contention_results: str | None = None
    loop_set: str | None = Field(default=None, description="a loop-set YAML whose runs `rlsim profile` makes")
    anchor: str | None = Field(
        default=None,
        description="a loop_set configuration whose measured step the profile keeps (anchored validation)",
    )
    skip_first: int = Field(
        default=1,
        ge=0,
        description="warm-up steps of each loop run not used (a run that records its own warmup_steps, as this "
        "rlsim's runner does, is read by that instead)",
    )
    disturbed_above: float | None = Field(
        default=0.15,
        ge=0,
        le=1,
        description="leave out scorer calls and loop steps during which other programs took more of the cores",
    )
    quiet: QuietGate | None = Field(default=None, description="wait for idle cores before each scorer cell")
    roles: RolesGrid | None = Field(default=None, description="time PPO's reference and critic (the roles section)")
    rewards: dict[str, RewardTiming] = Field(
        default_factory=dict,
        description=(
            "rewards that are no reward model, by the name a plan gives as its runtime: function and sandbox "
            "(reward_functions), genrm judges (runtimes, on the scorer grid)"
        ),
    )

    @model_validator(mode="after")
    def _anchor_in_a_loop_set(self) -> ProfileConfig:
        if self.anchor is not None and self.loop_set is None:
            raise ValueError("anchor names a configuration of loop_set, and loop_set is not given; add it")
        clash = sorted(set(self.rewards) & set(self.runtimes))
        if clash:
            raise ValueError(f"rewards {clash} are also listed in runtimes; give each profile key one meaning")
        return self

    def judges(self) -> dict[str, RewardTiming]:
        """The ``rewards`` timed on the scorer grid (judges), by name."""
        return {name: t for name, t in self.rewards.items() if t.runtime not in RULE_BASED}

    def rule_based(self) -> dict[str, RewardTiming]:
        """The ``rewards`` timed one rollout at a time (functions and sandboxes), by name."""
        return {name: t for name, t in self.rewards.items() if t.runtime in RULE_BASED}

    def cells(self) -> int:
        """Timed units of work progress counts: scorer cells (runtimes and judges), roles cells, reward calls."""
        cells = (len(self.runtimes) + len(self.judges())) * len(self.units) * len(self.batch_sizes) * len(self.lengths)
        if self.roles:
            cells += len(self.roles.units) * len(self.roles.batch_sizes) * len(self.roles.lengths)
        return cells + sum(t.rollouts for t in self.rule_based().values())


@dataclass
class Built:
    """The profile and a line per thing measured or not (for the report)."""

    profile: Profile
    measured: list[str] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)


def build_profile(
    config: ProfileConfig,
    base_dir: Path,
    measure: bool = True,
    fill_from: Profile | None = None,
    on_cell: Callable[[str], None] | None = None,
    loop_results: Sequence[Path] = (),
    scorers_from: Profile | None = None,
    notes: Sequence[str] = (),
) -> Built:
    """Measure and fit everything ``config`` allows. ``measure=False`` skips the real scorers.

    ``loop_results``: results.json files of loop runs made for this profile (the ``loop_set``), on top
    of ``config.loop_runs``. ``scorers_from``: a profile measured here earlier whose stored scorer
    samples are re-fitted instead of timing the scorers again. ``notes`` go into the profile.
    """
    measured: list[str] = []
    unmeasured: list[str] = []
    if fill_from is not None:
        taken = sorted(set(config.rewards) & {*fill_from.runtimes, *fill_from.reward_functions})
        if taken:
            raise RlsimError(
                f"rewards {taken} are named like entries of the --fill-from profile; a plan would not know which "
                "it means: rename them in the config's rewards"
            )
    runtimes = _scorers(config, measure, measured, unmeasured, on_cell, scorers_from)
    reward_functions = _rule_based(config, measure, measured, unmeasured, on_cell, scorers_from)
    roles = roles_section(
        config.roles, measure, scorers_from, config.disturbed_above, measured, unmeasured, on_cell, config.quiet
    )
    generation, trainer, calibration = _from_loop(config, base_dir, loop_results, measured, unmeasured)
    contention = _contention(config, base_dir, measured, unmeasured)
    if calibration and generation and trainer and runtimes:
        runtimes = with_in_loop_factors(calibration, runtimes, generation, trainer, measured, unmeasured)
        contention = loop_contention(calibration, runtimes, generation, trainer, contention, measured, unmeasured)
    sections = {"generation": generation, "trainer": trainer, "contention": contention}
    if fill_from is not None:
        for name, value in list(sections.items()):
            if value is None and getattr(fill_from, name) is not None:
                sections[name] = getattr(fill_from, name)
                unmeasured.append(
                    f"{name}: copied from the {fill_from.hardware_kind} profile "
                    f"({'illustrative' if fill_from.illustrative else 'measured'})"
                )
        if roles is None and fill_from.roles is not None:
            roles = fill_from.roles
            unmeasured.append(f"roles: copied from the {fill_from.hardware_kind} profile")
        if not calibration:
            runtimes = _assumed_in_loop(runtimes, fill_from, unmeasured)
        for name, model in fill_from.runtimes.items():
            if name not in runtimes:
                runtimes[name] = model
                unmeasured.append(f"runtime {name}: copied from the {fill_from.hardware_kind} profile")
        for name, function in fill_from.reward_functions.items():
            if name not in reward_functions:
                reward_functions[name] = function
                unmeasured.append(f"reward {name}: copied from the {fill_from.hardware_kind} profile")
    if not runtimes and not reward_functions:
        raise RlsimError("nothing to put in the profile: list runtimes or rewards to measure, or give --fill-from")
    illustrative = bool(fill_from and fill_from.illustrative and any("copied" in u for u in unmeasured))
    kept = {}
    if fill_from is not None and not calibration and sections["generation"] is fill_from.generation:
        # The copied loop sections come with the loop set they were fitted on and its anchor (anchored validation).
        kept = {"anchor": fill_from.anchor, "calibration": fill_from.calibration}
    profile = Profile(
        **new_profile_header(config.hardware_kind, illustrative=illustrative),
        notes=[*notes, f"measured by rlsim profile: {', '.join(measured) or 'nothing'}"],
        unmeasured=unmeasured,
        runtimes=runtimes,
        reward_functions=reward_functions,
        roles=roles,
        **sections,
        **kept,
    )
    return Built(profile, measured, unmeasured)


def _assumed_in_loop(
    runtimes: dict[str, ScorerLatencyModel], fill_from: Profile, unmeasured: list[str]
) -> dict[str, ScorerLatencyModel]:
    """Runtimes timed here with no loop run to fit their in-loop factor: the median factor and per-call overhead
    of the ``fill_from`` profile's runtimes that had one measured (as ``with_in_loop_factors`` assumes for a
    runtime no loop run used), said in ``unmeasured``; unchanged when that profile measured none."""
    known = [m for m in fill_from.runtimes.values() if m.in_loop_factor_measured]
    if not known:
        return runtimes
    factor = float(np.median([m.in_loop_factor for m in known]))
    overhead = float(np.median([m.call_overhead_s for m in known]))
    out = dict(runtimes)
    for name, model in runtimes.items():
        if model.in_loop_factor_measured:
            continue
        out[name] = model.model_copy(update={"in_loop_factor": factor, "call_overhead_s": overhead})
        unmeasured.append(
            f"runtime {name}: in-loop factor not measured (no loop run here); assumed {factor:.2f}x + "
            f"{overhead * 1000:.0f} ms per call, the median of the {fill_from.hardware_kind} profile's measured ones"
        )
    return out


def _scorers(
    config: ProfileConfig,
    measure: bool,
    measured: list[str],
    unmeasured: list[str],
    on_cell: Callable[[str], None] | None,
    scorers_from: Profile | None,
) -> dict[str, ScorerLatencyModel]:
    grid = ScorerGrid(config.batch_sizes, config.lengths, config.units, repeats=config.repeats)
    out = {}
    judges = config.judges()
    for runtime in [*config.runtimes, *judges]:
        old = scorers_from.runtimes.get(runtime) if scorers_from else None
        if old is not None and old.samples and scorers_from is not None and not scorers_from.illustrative:
            refit = fit_latency_model(old.samples, old.device, old.max_length, config.disturbed_above)
            out[runtime] = refit.model_copy(update={"pads": old.pads})
            measured.append(
                f"runtime {runtime}: re-fitted from {len(old.samples)} samples stored in the "
                f"{scorers_from.hardware_kind} profile (R^2 {out[runtime].fit.r2:.3f})"
            )
            continue
        if not measure:
            unmeasured.append(f"runtime {runtime}: scorer timing skipped (--no-scorers)")
            continue
        judge = judges.get(runtime)
        real = judge.runtime if judge else runtime
        samples, max_length = measure_runtime(
            real,
            config.reward_model,
            config.device,
            grid,
            on_cell,
            config.quiet,
            options=judge.options if judge else None,
            label=runtime,
        )
        context = judge.context_tokens() if judge else None  # a judge reads up to its max_model_len
        model = fit_latency_model(samples, config.device, context or max_length, config.disturbed_above)
        out[runtime] = model.model_copy(update={"pads": runtime_pads(real)})
        measured.append(
            f"{'judge' if judge else 'runtime'} {runtime} ({len(samples)} samples, R^2 {model.fit.r2:.3f}, "
            f"residual {model.fit.residual_rel_std:.1%})"
        )
    return out


def _rule_based(
    config: ProfileConfig,
    measure: bool,
    measured: list[str],
    unmeasured: list[str],
    on_cell: Callable[[str], None] | None,
    scorers_from: Profile | None,
) -> dict[str, RewardFunctionModel]:
    """The ``reward_functions`` section: each rule-based reward of ``config.rewards`` timed here (or its stored
    samples re-summarised from ``scorers_from``)."""
    out = {}
    for name, timing in config.rule_based().items():
        old = scorers_from.reward_functions.get(name) if scorers_from else None
        if old is not None and old.samples_s and scorers_from is not None and not scorers_from.illustrative:
            out[name] = summarise(old.samples_s, old.runtime)
            measured.append(
                f"reward {name}: from {len(old.samples_s)} samples stored in the {scorers_from.hardware_kind} profile"
            )
            continue
        if not measure:
            unmeasured.append(f"reward {name}: timing skipped (--no-scorers)")
            continue
        out[name] = model = time_rule_based(name, timing, list(config.lengths), on_cell, config.quiet)
        measured.append(
            f"reward {name} ({timing.runtime}, one worker): {model.mean_s * 1000:.2f} ms per rollout, "
            f"cv {model.cv:.2f} ({len(model.samples_s)} rollouts)"
        )
    return out


def runtime_pads(runtime: str) -> bool:
    """Whether ``runtime`` pads its batches (its registry entry; a plug-in registered here too)."""
    return SCORERS.info(runtime).pads if runtime in SCORERS else True


def _from_loop(
    config: ProfileConfig, base_dir: Path, extra_runs: Sequence[Path], measured: list[str], unmeasured: list[str]
) -> tuple[GenerationModel | None, TrainerModel | None, list[CalibrationRun]]:
    """Generation curve and trainer costs from loop runs: per step when a run's results.json says how
    it was set up (``calibrate``), else from per-run throughput points (older or foreign results)."""
    paths = [(_path(base_dir, run.path), run) for run in config.loop_runs] + [(p, None) for p in extra_runs]
    calibration: list[CalibrationRun] = []
    legacy: list[tuple[Path, LoopRun]] = []
    for path, run in paths:
        try:
            if run is not None and (run.running is not None or run.units is not None):
                raise RlsimError("running/units given by hand")  # the user overrides the run's own settings
            calibration.append(read_calibration_run(path, config.skip_first, config.disturbed_above))
        except RlsimError:
            legacy.append((path, run or LoopRun(path=str(path))))
    if calibration:
        generation, trainer = calibrated_models(
            calibration, config.generation_device, config.max_running, measured, unmeasured
        )
        return generation, trainer, calibration
    generation, trainer = _from_points(config, legacy, measured, unmeasured)
    return generation, trainer, []


def _from_points(
    config: ProfileConfig, legacy: list[tuple[Path, LoopRun]], measured: list[str], unmeasured: list[str]
) -> tuple[GenerationModel | None, TrainerModel | None]:
    """One throughput point per run (``running``, ``units`` given or read from the run)."""
    runs = [read_loop_steps(path, config.skip_first) for path, _ in legacy]
    points = list(config.generation_points)
    trainer_units = config.trainer_units
    for (path, run), steps in zip(legacy, runs, strict=True):
        try:
            running, units = run.running, run.units
            if running is None or units is None:
                settings = read_run_settings(path)
                running = running or min(settings.rollouts_per_step, config.max_running)
                units = units or settings.rollout_units
                trainer_units = settings.trainer_units
            points.append(generation_point(steps, running, units))
        except RlsimError as err:
            unmeasured.append(f"generation point from {run.path}: {err}")
    generation = None
    try:
        generation = fit_generation_model(points, config.generation_device, config.max_running)
        measured.append(f"generation curve ({len(points)} points, R^2 {generation.fit.r2:.3f})")
    except RlsimError as err:
        unmeasured.append(f"generation: {err}")
    trainer = None
    if runs:
        try:
            trainer = trainer_model(runs, trainer_units)
            measured.append(f"update/sync cost per token and step overhead ({len(runs)} run(s))")
        except RlsimError as err:
            unmeasured.append(f"trainer: {err}")
    else:
        unmeasured.append("trainer (update/sync): no loop_runs given")
    return generation, trainer


def _contention(
    config: ProfileConfig, base_dir: Path, measured: list[str], unmeasured: list[str]
) -> ContentionModel | None:
    if not config.contention_results:
        unmeasured.append("contention: no contention_results given (run `rlsim experiment contention`)")
        return None
    per_runtime, missing = read_contention(_path(base_dir, config.contention_results))
    unmeasured.extend(missing)
    if not per_runtime:
        return None
    # The default for runtimes the experiment did not run: the worst measured (a cautious plan).
    worst = ContentionEntry(
        gen_slowdown=max(e.gen_slowdown for e in per_runtime.values()),
        score_slowdown=max(e.score_slowdown for e in per_runtime.values()),
    )
    measured.append(f"contention for {', '.join(sorted(per_runtime))}")
    return ContentionModel(default=worst, per_runtime=per_runtime)


def _path(base_dir: Path, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else base_dir / p
