"""``rlsim profile --from-log FILE``: a planner profile fitted to a verl or OpenRLHF metrics log.

Example: ``rlsim profile --from-log tests/planner/data/verl_metrics.jsonl --gpus 8 --out out/verl_profile.json``
(prints how closely the fitted profile reproduces every logged step time).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlsim.cli.common import positive_int
from rlsim.errors import RlsimError
from rlsim.progress import make_console


def add_log_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("from a framework's log")
    g.add_argument(
        "--from-log",
        type=Path,
        default=None,
        metavar="FILE",
        help="fit the profile to per-step metrics logged by verl or OpenRLHF (JSONL) instead of measuring",
    )
    g.add_argument("--gpus", type=positive_int, default=8, help="--from-log: GPUs the logged run used (default 8)")
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

    from rlsim.io import atomic_write_json, check_output_file
    from rlsim.planner.calibrate.framework_logs import read_framework_log
    from rlsim.planner.calibrate.log_fit import LogLayout, fit_log_profile, plan_placement, replay_steps
    from rlsim.planner.profile.schema import save_profile

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
    fmt, steps = read_framework_log(args.from_log)
    if args.gpu_run is not None:
        return _gpu_efficiency_from_log(args, fmt.name, steps)
    layout = LogLayout(gpus=args.gpus, engine_gpus=args.engine_gpus)
    profile = fit_log_profile(
        fmt,
        steps,
        layout,
        args.hardware_kind or f"from-log-{fmt.name}",
        notes=[
            f"command: rlsim profile --from-log {args.from_log} --gpus {args.gpus} --engine-gpus {args.engine_gpus}"
        ],
    )
    from rlsim.fingerprint import cluster_fingerprint

    machine = {**cluster_fingerprint(args.gpu_model or "", layout.gpus, 0), "source": f"{fmt.name} log {args.from_log}"}
    profile = profile.model_copy(update={"machine": machine})
    simulated = replay_steps(profile, steps, layout)
    errors = [sim / s.step_s - 1.0 for sim, s in zip(simulated, steps, strict=True)]
    save_profile(profile, args.out)
    summary = {
        "profile": str(args.out),
        "format": fmt.name,
        "steps": len(steps),
        "gpus": layout.gpus,
        "engine_gpus": layout.engine_gpus,
        "logged_step_s": [s.step_s for s in steps],
        "simulated_step_s": simulated,
        "median_abs_error": float(sorted(abs(e) for e in errors)[len(errors) // 2]),
        "max_abs_error": float(max(abs(e) for e in errors)),
        "plan_placement": plan_placement(max(s.rollouts for s in steps)),
    }
    if args.summary:
        atomic_write_json(args.summary, summary)
    out = make_console()
    out.print(
        f"wrote {args.out} ({profile.hardware_kind}): fitted to {len(steps)} {fmt.name} steps on "
        f"{layout.gpus} GPUs ({layout.engines} engine(s) of {layout.engine_gpus})"
    )
    out.print(
        f"  simulated vs logged step time: median |error| {summary['median_abs_error']:.1%}, "
        f"max {summary['max_abs_error']:.1%}"
    )
    out.print(f"  plan with: nodes.gpus {layout.gpus}, placement {summary['plan_placement']}")
    for line in profile.unmeasured:
        out.print(f"  [yellow]not measured[/yellow]  {line}")
    return 0


def _gpu_efficiency_from_log(args: argparse.Namespace, fmt: str, steps: list) -> int:
    from rlsim.planner.calibrate.gpu_log_fit import fit_from_log
    from rlsim.planner.profile.gpu_efficiency import load_efficiency, save_efficiency
    from rlsim.planner.spec.gpu_run import load_gpu_run

    config, eff_path = load_gpu_run(args.gpu_run, [])
    eff = fit_from_log(config, load_efficiency(eff_path), steps, f"{fmt} log {args.from_log}")
    save_efficiency(eff, args.out)
    out = make_console()
    out.print(f"wrote {args.out}: {config.name}'s efficiency refilled from {len(steps)} {fmt} steps ({args.from_log})")
    for key in ("decode_fixed_s", "train_mfu", "logprob_mfu", "refit_fixed_s", "step_overhead_s"):
        out.print(f"  {key} = {getattr(eff, key)}")
    out.print(f"  plan with: set `efficiency: {args.out}` in {args.gpu_run}")
    return 0
