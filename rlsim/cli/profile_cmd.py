"""``rlsim profile CONFIG --out PROFILE``: measure what the planner's simulation needs on this machine.

Example: ``rlsim profile configs/profiles/measure_cpu_2core.yaml --out configs/profiles/cpu_2core_measured.json``
(real loop runs of the config's ``loop_set`` for generation, update, sync and contention, then the
scorer latency grid). ``--reuse`` keeps complete loop runs of the same config already in ``--runs``.
``rlsim profile --from-log metrics.jsonl --gpus 8 --out PROFILE`` fits generation, scoring, update and sync
to the per-step metrics a verl or OpenRLHF run logged, as found: console, JSONL, TensorBoard or W&B (docs/logs.md).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlsim.config_loader import load_config
from rlsim.errors import RlsimError
from rlsim.fingerprint import machine_fingerprint, measure_gemm
from rlsim.io import atomic_write_json, check_output_dir, check_output_file
from rlsim.planner.measure.loop_runner import RealLoopRunner, run_cases, step_loads
from rlsim.planner.measure.loop_set import load_loop_set, resolve_cases, resolve_path
from rlsim.planner.profile.schema import CalibrationSet, load_profile, save_profile

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from rlsim.planner.measure.build_profile import Built, ProfileConfig
    from rlsim.planner.measure.loop_set import LoopCase, LoopSet
    from rlsim.planner.profile.schema import Profile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = __doc__
    p.add_argument(
        "config",
        type=Path,
        nargs="?",
        default=None,
        help="profile YAML (runtimes, grid, loop set or results, contention results); not with --from-log",
    )
    p.add_argument("--out", type=Path, required=True, help="profile JSON to write")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set repeats=5 (repeatable)",
    )
    p.add_argument(
        "--fill-from",
        type=Path,
        default=None,
        help="copy sections this run cannot measure from another profile (listed as unmeasured)",
    )
    p.add_argument(
        "--no-scorers",
        action="store_true",
        help="skip timing real scorers (fit only from the loop/contention results given)",
    )
    p.add_argument(
        "--scorers-from",
        type=Path,
        default=None,
        help="re-fit the scorer models from the samples stored in this measured profile instead of timing",
    )
    p.add_argument(
        "--runs", type=Path, default=None, help="folder for the loop set's runs (default runs/profile/HARDWARE_KIND)"
    )
    p.add_argument("--reuse", action="store_true", help="reuse complete loop runs of the same config in --runs")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check the config, its loop set and every loop config, print what would run; start nothing",
    )
    p.add_argument(
        "--summary",
        type=Path,
        default=None,
        help="also write a short JSON summary (what was measured, fitted numbers, wall time) here",
    )
    from rlsim.cli.profile_log import add_log_arguments

    add_log_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.from_log is not None or args.config is None:
        from rlsim.cli.profile_log import run_from_log

        return run_from_log(args)

    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from rlsim.planner.measure.build_profile import ProfileConfig, build_profile
    from rlsim.progress import LineProgress, make_console

    t0 = time.perf_counter()
    config = load_config(ProfileConfig, args.config, args.overrides)
    _check_outputs(args)  # before any loop run or timing: a bad path must cost nothing
    base_dir = args.config.resolve().parent
    if args.dry_run:
        return _dry_run(config, base_dir, args)
    fill = load_profile(args.fill_from) if args.fill_from else None
    scorers_from = load_profile(args.scorers_from) if args.scorers_from else None
    console = make_console(stderr=True)
    loop_results, records, check_fit = _loop_runs(config, base_dir, args, console)
    cells = config.cells()
    with LineProgress(
        TextColumn("measuring"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=cells if not args.no_scorers else 0)
        built = build_profile(
            config,
            base_dir,
            measure=not args.no_scorers,
            fill_from=fill,
            on_cell=lambda label: bar.update(task, advance=1, description=label),
            loop_results=loop_results,
            scorers_from=scorers_from,
            notes=_provenance(args, scorers_from),
        )
    profile = built.profile.model_copy(update={"machine": _machine(config, measured=not args.no_scorers), **records})
    save_profile(profile, args.out)  # before the check of its fit: whatever that meets, the measurements are kept
    fit_errors = check_fit(profile) if profile.generation and profile.trainer and profile.contention else {}
    if profile.calibration is not None and fit_errors:
        profile = profile.model_copy(
            update={"calibration": profile.calibration.model_copy(update={"fit_errors": fit_errors})}
        )
        save_profile(profile, args.out)
    if args.summary:
        summary = _summary(built, args, time.perf_counter() - t0)
        atomic_write_json(args.summary, {**summary, "fit_errors": fit_errors})
    out = make_console()
    out.print(f"wrote {args.out} ({built.profile.hardware_kind}, rlsim {built.profile.rlsim_version})")
    for line in built.measured:
        out.print(f"  [green]measured[/green]  {line}")
    for line in built.unmeasured:
        out.print(f"  [yellow]not measured[/yellow]  {line}")
    if fit_errors:
        out.print(fit_check_line(fit_errors))
    missing = [s for s in ("generation", "trainer", "contention") if getattr(built.profile, s) is None]
    if missing:
        out.print(
            f"[yellow]the planner needs {', '.join(missing)} as well[/yellow]: give loop_set / loop_runs / "
            "contention_results in the config, or --fill-from a profile that has them"
        )
    return 0


# A calibration run the finished profile misses by more than this is named: on this project's 2-core VMs a fit
# made in one steady hour re-predicts its own runs within about 9% (benchmarks/README.md, 2026-12-06).
FIT_MISS = 0.2


def fit_check_line(errors: dict[str, float]) -> str:
    """One line on how the finished profile re-predicts its own calibration runs, naming those it misses."""
    size = sorted(abs(e) for e in errors.values())
    line = (
        f"  fit check: the profile re-predicts its {len(errors)} calibration run(s) within median "
        f"{size[len(size) // 2]:.1%}, worst {size[-1]:.1%}"
    )
    missed = {k: e for k, e in errors.items() if abs(e) > FIT_MISS}
    if not missed:
        return line
    named = ", ".join(f"{k} {e:+.0%}" for k, e in missed.items())
    return (
        f"{line}\n  [yellow]warning[/yellow]: the fit misses {named} by more than {FIT_MISS:.0%}: the model cannot "
        "follow them, or they ran at another speed than the rest (a shared host drifting during the loop set does "
        "this; other programs' share is in each run's machine_load.json); predictions from this profile carry it. "
        "Delete those runs' folders and run the command again with --runs DIR --reuse at a steadier hour (the "
        "other runs are kept)"
    )


def _check_outputs(args: argparse.Namespace) -> None:
    check_output_file(args.out, "--out")
    if args.summary:
        check_output_file(args.summary, "--summary")
    if args.runs:
        check_output_dir(args.runs, "--runs")


def _loop_runs(
    config: ProfileConfig, base_dir: Path, args: argparse.Namespace, console: Console
) -> tuple[list[Path], dict[str, Any], Callable[[Profile], dict[str, float]]]:
    """Run the config's loop set (if any); returns its results.json paths, the profile's ``calibration``
    and ``anchor`` records (what anchored validation checks and scales with), and the check of the finished
    profile against these runs (``own_run_errors``)."""
    if not config.loop_set:
        return [], {}, lambda _profile: {}
    from rlsim.planner.measure.loop_results import anchor_record
    from rlsim.planner.validate.compare import own_run_errors

    loop_set, cases = _loop_cases(config, base_dir, args)
    runs_dir = args.runs or Path("runs") / "profile" / config.hardware_kind
    paths = run_cases(
        cases,
        RealLoopRunner(console=console, quiet=loop_set.quiet),
        runs_dir,
        reuse=args.reuse,
        note=console.print,
    )

    def check(profile: Profile) -> dict[str, float]:
        return own_run_errors(cases, profile, runs_dir, loop_set.warmup_steps, loop_set.disturbed_above)

    calibration = CalibrationSet(
        loop_set=config.loop_set, configs={c.name: c.config.model_dump(mode="json") for c in cases}
    )
    anchor = next((c for c in cases if c.name == config.anchor), None)
    if anchor is None:
        return paths, {"calibration": calibration}, check
    out = runs_dir / anchor.name
    record = anchor_record(
        anchor.name,
        config.loop_set,
        anchor.config.model_dump(mode="json"),
        out / "results.json",
        loop_set.warmup_steps,
        step_loads(out),
        loop_set.disturbed_above,
    )
    return paths, {"calibration": calibration, "anchor": record}, check


def _loop_cases(config: ProfileConfig, base_dir: Path, args: argparse.Namespace) -> tuple[LoopSet, list[LoopCase]]:
    """The loop set's cases, every config validated; the anchor, if named, must be one of them."""
    assert config.loop_set is not None
    path = resolve_path(base_dir, config.loop_set)
    loop_set, set_dir = load_loop_set(path)
    cases = resolve_cases(loop_set, set_dir, source=str(path))
    if config.anchor is not None:
        from rlsim.planner.validate.anchor import check_anchor_case

        anchor = next((c for c in cases if c.name == config.anchor), None)
        if anchor is None:
            raise RlsimError(
                f"{args.config}: anchor {config.anchor!r} is not a configuration of the loop set {path} "
                f"(it has: {', '.join(c.name for c in cases)})"
            )
        check_anchor_case(anchor, str(args.config))
    return loop_set, cases


def _dry_run(config: ProfileConfig, base_dir: Path, args: argparse.Namespace) -> int:
    """Validate everything `rlsim profile` would run (loop configs included) and list it; no model loads."""
    cells = len(config.runtimes) * len(config.units) * len(config.batch_sizes) * len(config.lengths)
    calls = cells * (config.repeats + 1)
    print(
        f"profile {config.hardware_kind} on {config.device}: {len(config.runtimes)} runtime(s) "
        f"({', '.join(config.runtimes) or 'none'}) x {len(config.units)} unit count(s) x {len(config.batch_sizes)} "
        f"batch sizes x {len(config.lengths)} lengths = {cells} cells, {calls} scorer calls (warm-up included)"
    )
    if config.roles:
        r = config.roles
        print(
            f"roles on {r.policy}: reference ({', '.join(r.reference_runtimes)}), critic values and update x "
            f"{len(r.units)} thread count(s) x {len(r.batch_sizes)} batch sizes x {len(r.lengths)} lengths = "
            f"{r.calls()} timed calls (warm-up included)"
            + (
                f", then two critic updates at once vs one alone per thread count ({3 * len(set(r.units))} processes)"
                if r.sharing
                else ""
            )
        )
    for name, timing in config.rewards.items():
        how = (
            f"{timing.rollouts} rollouts one at a time on one worker ({timing.warmup} warm-up)"
            if name in config.rule_based()
            else f"the scorer grid, {len(config.units) * len(config.batch_sizes) * len(config.lengths)} cells"
        )
        print(f"reward {name} ({timing.runtime}): {how}")
    if config.loop_set:
        path = resolve_path(base_dir, config.loop_set)
        loop_set, cases = _loop_cases(config, base_dir, args)  # every loop config validated here
        steps = f"{loop_set.steps} steps ({loop_set.warmup_steps} warm-up after each actor start-up)"
        print(f"loop set {path}: {len(cases)} configs x {steps}")
        if config.anchor:
            print(f"  anchor {config.anchor}: its measured step is kept in the profile (anchored validation)")
        for case in cases:
            cfg = case.config
            print(
                f"  {case.name}: {cfg.schedule}, {cfg.workload.prompts_per_step} x {cfg.workload.group_size} rollouts, "
                f"policy on {cfg.policy.device}, reward {cfg.reward.runtime} on {cfg.reward.device}"
            )
    print(f"dry run: nothing started; without --dry-run this writes {args.out}")
    return 0


def _machine(config: ProfileConfig, measured: bool) -> dict[str, Any]:
    """This machine's fingerprint, with the fp32 GEMM rate at the scorer thread counts when scorers were
    timed (torch is loaded then anyway; about a second per thread count)."""
    gemm = measure_gemm(config.device, list(config.units)) if measured and config.runtimes else {}
    return machine_fingerprint(gemm)


def _provenance(args: argparse.Namespace, scorers_from: Profile | None) -> list[str]:
    """When, where and by which command the profile was measured (kept in the profile's notes)."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    notes = [
        f"measured {datetime.now(timezone.utc).isoformat(timespec='seconds')} on {socket.gethostname()} "
        f"({len(os.sched_getaffinity(0))} cores; load average at the end {load})",
        "command: rlsim " + " ".join(sys.argv[1:])
        if "profile" in sys.argv
        else f"command: rlsim profile {args.config}",
    ]
    if scorers_from is not None:  # where the re-fitted scorer samples were measured (kept through refits)
        carried = [n for n in scorers_from.notes if n.startswith("scorer samples:")]
        notes += carried or [
            f"scorer samples: {n}" for n in scorers_from.notes if n.startswith(("measured 2", "command:"))
        ]
    if args.reuse:
        notes.append(
            "--reuse: complete loop runs of the same config already in the runs folder were used as they "
            "were (made earlier on this machine); the others were run by this command"
        )
    return notes


def _summary(built: Built, args: argparse.Namespace, wall_s: float) -> dict[str, Any]:
    """The profile's fitted numbers without its samples, plus how and how long it was measured."""
    prof = built.profile
    return {
        "profile": str(args.out),
        "hardware_kind": prof.hardware_kind,
        "notes": prof.notes,
        "wall_s": round(wall_s, 1),
        "measured": built.measured,
        "unmeasured": built.unmeasured,
        "runtimes": {k: m.model_dump(mode="json", exclude={"samples"}) for k, m in prof.runtimes.items()},
        "generation": prof.generation.model_dump(mode="json") if prof.generation else None,
        "trainer": prof.trainer.model_dump(mode="json") if prof.trainer else None,
        "contention": prof.contention.model_dump(mode="json") if prof.contention else None,
        "roles": _without_samples(prof.roles.model_dump(mode="json")) if prof.roles else None,
    }


def _without_samples(value: Any) -> Any:
    """``value`` (nested dicts and lists) with every ``samples`` key left out."""
    if isinstance(value, dict):
        return {k: _without_samples(v) for k, v in value.items() if k != "samples"}
    return value
