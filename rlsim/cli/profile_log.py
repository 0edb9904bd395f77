"""``rlsim profile --from-log FILE``: a planner profile fitted to a verl or OpenRLHF metrics log.

Example: ``rlsim profile --from-log tests/planner/data/verl_metrics.jsonl --gpus 8 --out out/verl_profile.json``
(prints how closely the fitted profile reproduces every logged step time, in sample and held out).
``rlsim plan replay LOG --profile P`` predicts another log's steps with a profile fitted on one run.
Formats, releases and examples: ``docs/logs.md``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from rlsim.cli.common import positive_int
from rlsim.errors import RlsimError
from rlsim.fingerprint import cluster_fingerprint
from rlsim.io import atomic_write_text, check_output_file
from rlsim.planner.profile.gpu_efficiency import load_efficiency, save_efficiency
from rlsim.planner.profile.logs.frameworks import load_framework_log
from rlsim.planner.profile.schema import load_profile, save_profile
from rlsim.planner.spec.gpu_run import load_gpu_run
from rlsim.progress import make_console

if TYPE_CHECKING:
    from rlsim.planner.profile.fitting.logs import LogLayout
    from rlsim.planner.profile.logs.frameworks import FrameworkLog, LoggedStep
    from rlsim.planner.profile.logs.replay import Replay
    from rlsim.planner.profile.schema import Profile

GENERATION_PARAMETERS = 4  # fixed per step, per decode iteration, per sequence-iteration, per prompt token


def add_log_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("from a framework's log")
    g.add_argument(
        "--from-log",
        type=Path,
        default=None,
        metavar="FILE",
        help="fit the profile to per-step metrics logged by verl or OpenRLHF (JSONL) instead of measuring",
    )
    g.add_argument(
        "--gpus",
        type=positive_int,
        default=None,
        help="--from-log: GPUs the logged run used (default: as the log says, verl's perf/throughput; else 8)",
    )
    g.add_argument(
        "--engine-gpus",
        type=positive_int,
        default=1,
        help="--from-log: GPUs per generation engine in the logged run (tensor parallel size; default 1)",
    )
    g.add_argument(
        "--gpu-model",
        default=None,
        help="--from-log: GPU model of the logged run (e.g. H100-SXM5-80GB), kept as the profile's machine",
    )
    g.add_argument(
        "--hardware-kind", default=None, help="--from-log: the profile's hardware kind (default from-log-FORMAT)"
    )
    g.add_argument(
        "--gpu-run",
        type=Path,
        default=None,
        metavar="RUN.yaml",
        help="--from-log: refill the GPU step model's efficiency factors of this kind: gpu-step run from the "
        "log (writes an efficiency JSON to --out; docs/gpu-planner.md)",
    )


def run_from_log(args: argparse.Namespace) -> int:
    from rlsim.planner.profile.fitting.logs import LogLayout, fit_log_profile, fit_warnings, plan_placement
    from rlsim.planner.profile.logs.replay import holdout, replay

    if args.from_log is None:
        raise RlsimError(
            "give a profile YAML (`rlsim profile CONFIG --out PROFILE`) or a framework log "
            "(`rlsim profile --from-log FILE --out PROFILE`)"
        )
    if args.config is not None:
        raise RlsimError("give either a profile YAML or --from-log FILE, not both")
    check_output_file(args.out, "--out")
    if args.summary:
        check_output_file(args.summary, "--summary")
    log = load_framework_log(args.from_log, world_size=args.gpus)
    if args.gpu_run is not None:
        return _gpu_efficiency_from_log(args, log.format.name, log.steps)
    warnings = list(log.warnings)
    gpus = _gpus(args.gpus, log.gpus, args.from_log, warnings)
    layout = LogLayout(gpus=gpus, engine_gpus=args.engine_gpus)
    kind = args.hardware_kind or f"from-log-{log.format.name}"
    notes = [f"command: rlsim profile --from-log {args.from_log} --gpus {gpus} --engine-gpus {args.engine_gpus}"]
    profile = fit_log_profile(log.format, log.steps, layout, kind, notes=[*notes, *log.notes])

    source = f"{log.format.name} {log.release} log {args.from_log}"
    machine = {**cluster_fingerprint(args.gpu_model or "", layout.gpus, 0), "source": source}
    profile = profile.model_copy(update={"machine": machine})
    warnings += fit_warnings(log.steps, layout)
    fitted = replay(profile, log.steps, layout)
    held = holdout(log.format, log.steps, layout, kind)
    save_profile(profile, args.out)
    summary = {
        "profile": str(args.out),
        "format": log.format.name,
        "release": log.release,
        "container": log.container,
        "steps": len(log.steps),
        "gpus": layout.gpus,
        "gpus_from": "log" if log.gpus is not None and args.gpus is None else ("--gpus" if args.gpus else "default"),
        "engine_gpus": layout.engine_gpus,
        **replay_summary(fitted, "in_sample"),
        **(replay_summary(held, "held_out") if held else {"held_out": None}),
        "periodic_phases": _periodic(log.steps),
        "warnings": warnings,
        "plan_placement": plan_placement(max(s.rollouts for s in log.steps)),
    }
    summary["logged_step_s"] = fitted.logged_s
    summary["simulated_step_s"] = fitted.simulated_s
    summary["median_abs_error"] = fitted.median_abs_error
    summary["max_abs_error"] = fitted.max_abs_error
    if args.summary:
        _write_strict_json(args.summary, summary)
    _print(args, log, layout, profile, fitted, held, warnings, summary)
    return 0


def _gpus(given: int | None, logged: int | None, path: Path, warnings: list[str]) -> int:
    if given is not None and logged is not None and given != logged:
        raise RlsimError(
            f"--gpus {given}, but {path}'s perf/throughput says the run had {logged} GPUs: "
            f"give --gpus {logged} or leave --gpus out"
        )
    if given is not None:
        return given
    if logged is not None:
        return logged
    warnings.append("the log does not say its GPU count: assumed 8 (give --gpus N)")
    return 8


def _periodic(steps: list[LoggedStep]) -> dict[str, dict[str, float]]:
    """Per periodic phase (validation, checkpoint): on how many steps, seconds in all and per time."""
    out: dict[str, dict[str, float]] = {}
    for s in steps:
        for name, secs in s.periodic:
            d = out.setdefault(name, {"steps": 0, "total_s": 0.0})
            d["steps"] += 1
            d["total_s"] += secs
    for d in out.values():
        d["mean_s"] = d["total_s"] / d["steps"]
    return out


def replay_summary(r: Replay, prefix: str) -> dict[str, Any]:
    """The JSON fields of one replay (errors relative; totals in seconds)."""
    return {
        prefix: {
            "steps": len(r.logged_s),
            "median_abs_error": r.median_abs_error,
            "max_abs_error": r.max_abs_error,
            "logged_total_s": r.logged_total_s,
            "simulated_total_s": r.simulated_total_s,
            "total_error": r.total_error,
            "phase_median_abs_error": r.phase_median_abs_error,
        }
    }


def _write_strict_json(path: Path, obj: dict[str, Any]) -> None:
    """JSON with no NaN or Infinity (which JSON has no spelling for): such a number becomes null."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    atomic_write_text(path, json.dumps(clean(obj), indent=2, allow_nan=False) + "\n")


def _print(
    args: argparse.Namespace,
    log: FrameworkLog,
    layout: LogLayout,
    profile: Profile,
    fitted: Replay,
    held: Replay | None,
    warnings: list[str],
    summary: dict[str, Any],
) -> None:
    out = make_console()
    err = make_console(stderr=True)
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}")
    out.print(
        f"wrote {args.out} ({profile.hardware_kind}): fitted to {len(log.steps)} {log.format.name} steps "
        f"(release {escape(log.release)}, {log.container}) on {layout.gpus} GPUs ({layout.engines} engine(s) of "
        f"{layout.engine_gpus}; GPUs from {summary['gpus_from']})"
    )
    out.print(
        f"  in sample ({GENERATION_PARAMETERS} generation parameters on {len(log.steps)} steps): {replay_line(fitted)}"
    )
    if held is not None:
        out.print(f"  held out (fitted on the first {len(log.steps) - len(held.logged_s)} steps): {replay_line(held)}")
    else:
        out.print(f"  held out: not checked (a log of {len(log.steps)} steps is too short to hold any out)")
    for name, d in summary["periodic_phases"].items():
        out.print(
            f"  {name}: on {d['steps']} step(s), {d['mean_s']:.1f} s each; left out of the per-step fit and "
            "added to the whole-run total as logged"
        )
    out.print(f"  plan with: nodes.gpus {layout.gpus}, placement {summary['plan_placement']}")
    for line in profile.unmeasured:
        out.print(f"  [yellow]not measured[/yellow]  {line}")


def replay_line(r: Replay) -> str:
    """One line of a replay: per-step and whole-run errors."""
    phases = ", ".join(f"{k} {v:.1%}" for k, v in r.phase_median_abs_error.items())
    return (
        f"median |error| {r.median_abs_error:.1%}, max {r.max_abs_error:.1%} over {len(r.logged_s)} steps; "
        f"whole run {r.simulated_total_s:.0f} s simulated vs {r.logged_total_s:.0f} s logged ({r.total_error:+.1%}); "
        f"median |error| per phase: {phases}"
    )


def run_replay(args: argparse.Namespace) -> int:
    """``rlsim plan replay LOG --profile P``: a profile's prediction of every step of a log."""

    from rlsim.planner.profile.fitting.logs import LogLayout, extrapolation
    from rlsim.planner.profile.logs.replay import replay

    if args.validation is None or args.profile is None:
        raise RlsimError("give a log and a profile: rlsim plan replay LOG --profile PROFILE.json")
    profile = load_profile(args.profile)
    if profile.generation is None or profile.trainer is None or "logged" not in profile.runtimes:
        raise RlsimError(
            f"{args.profile} is not fitted to a log (no `logged` runtime): make one with "
            "rlsim profile --from-log LOG --out PROFILE"
        )
    layout = LogLayout(gpus=round(profile.trainer.units), engine_gpus=round(profile.generation.units))
    log = load_framework_log(args.validation, world_size=layout.gpus)
    err = make_console(stderr=True)
    for w in log.warnings:
        err.print(f"warning: {w}")
    if log.gpus is not None and log.gpus != layout.gpus:
        err.print(f"warning: the log's run had {log.gpus} GPUs, the profile was fitted on {layout.gpus}")
    beyond = extrapolation(
        profile,
        [s.response_mean for s in log.steps],
        max(s.response_max for s in log.steps),
        max(s.rollouts for s in log.steps),
    )
    if beyond:
        err.print(f"warning: {beyond}")
    r = replay(profile, log.steps, layout)
    if args.json:
        _write_strict_json(
            args.json, {"log": str(args.validation), "profile": str(args.profile), **replay_summary(r, "replay")}
        )
    make_console().print(f"{args.validation} with {args.profile}: {replay_line(r)}")
    return 0


def _gpu_efficiency_from_log(args: argparse.Namespace, fmt: str, steps: list) -> int:
    from rlsim.planner.profile.fitting.gpu_logs import fit_from_log

    config, eff_path = load_gpu_run(args.gpu_run, [])
    eff = fit_from_log(config, load_efficiency(eff_path), steps, f"{fmt} log {args.from_log}")
    save_efficiency(eff, args.out)
    out = make_console()
    out.print(f"wrote {args.out}: {config.name}'s efficiency refilled from {len(steps)} {fmt} steps ({args.from_log})")
    for key in ("decode_fixed_s", "train_mfu", "logprob_mfu", "refit_fixed_s", "step_overhead_s"):
        out.print(f"  {key} = {getattr(eff, key)}")
    out.print(f"  plan with: set `efficiency: {args.out}` in {args.gpu_run}")
    return 0
