"""``rlsim plan CLUSTER.yaml``: predict RLHF step time on a cluster and search placements.

Example: ``rlsim plan configs/cluster_example.yaml --target-step-s 90 --out out/plan``.
``rlsim plan validate [VALIDATION.yaml]`` runs the real loop on this machine for each configuration of
the set (default, in a source checkout: ``configs/validate_cpu.yaml``) and compares the planner's step
time with the measured one:
``rlsim plan validate configs/validate_cpu.yaml --out runs/validate --json benchmarks/results/plan_validate_cpu.json``.
``rlsim plan --validate [VALIDATION.yaml]`` still works (deprecated, with a note).
A YAML with ``kind: gpu-step`` is predicted by the GPU step model instead (``plan_gpu``):
``rlsim plan configs/gpu_step_llama8b_h100.yaml --out out/gpu-plan``.
``rlsim plan replay LOG --profile PROFILE.json`` predicts every step of a verl/OpenRLHF log with a profile
fitted (``rlsim profile --from-log``) on another run, and prints the per-step and whole-run errors.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlsim.cli.common import positive_float, positive_int
from rlsim.cli.plan_gpu import run_gpu_plan
from rlsim.cli.profile_log import run_replay
from rlsim.errors import RlsimError
from rlsim.io import atomic_write_json, check_output_dir, check_output_file
from rlsim.planner.profile.sources import provenance_line, provenance_summary
from rlsim.planner.search.plan import execute, prepare
from rlsim.planner.search.report import plot_plan, plot_share_curves, print_plan, ranked_table
from rlsim.planner.spec.cluster import load_plan_config
from rlsim.planner.spec.gpu_run import is_gpu_run
from rlsim.progress import make_console

# Only a source checkout has configs/ beside the package; an installed wheel does not ship them.
CHECKOUT_CONFIGS = Path(__file__).resolve().parents[2] / "configs"
VALIDATE = "validate"
REPLAY = "replay"  # rlsim plan replay LOG --profile P: a log-fitted profile's prediction of another log
_DEFAULT = ""  # ``--validate`` given without a path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = __doc__
    p.usage = (
        "rlsim plan CLUSTER.yaml [options]\n       rlsim plan validate [VALIDATION.yaml] [options]\n"
        "       rlsim plan replay LOG --profile PROFILE.json [--json OUT.json]"
    )
    p.add_argument(
        "config",
        nargs="?",
        default=None,
        metavar="CLUSTER.yaml | validate",
        help="cluster YAML (nodes, profiles, workload, placement, search), a `kind: gpu-step` run YAML "
        "(the datasheet-based GPU step model, docs/gpu-planner.md), or `validate`: run the real "
        "loop for each config of a validation set and report predicted vs measured step time",
    )
    p.add_argument(
        "validation",
        type=Path,
        nargs="?",
        default=None,
        metavar="VALIDATION.yaml",
        help="after `validate`: the validation set (default: configs/validate_cpu.yaml of a source checkout)",
    )
    p.add_argument(
        "--validate",
        nargs="?",
        const=_DEFAULT,
        default=None,
        metavar="VALIDATION",
        help="deprecated spelling of `rlsim plan validate [VALIDATION.yaml]`",
    )
    p.add_argument("--profile", type=Path, default=None, help="validate: predict from this profile instead")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="validate: reuse complete runs of the same config already in OUT/runs (re-predict only)",
    )
    p.add_argument(
        "--no-anchor",
        dest="anchored",
        action="store_false",
        help="validate: do not interleave the set's anchor; raw errors only (docs/planner.md, anchored validation)",
    )
    p.add_argument(
        "--target-step-s",
        type=positive_float,
        default=None,
        help="step-time target (s): search for the fewest resources that meet it",
    )
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        help="write the plan JSON here (default: OUT/plan.json; validate: OUT/validate.json)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for plan.json and the PNG plots (validate: for the loop runs, default runs/validate)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set workload.group_size=8 (repeatable)",
    )
    p.add_argument("--top", type=positive_int, default=15, help="rows of the ranked table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.validate is not None or args.config == VALIDATE:
        return _validate(args)
    if args.config == REPLAY:
        return run_replay(args)
    _check_plan_args(args)
    if _is_gpu_run(args.config):  # the datasheet-based GPU step model (docs/gpu-planner.md)
        return run_gpu_plan(args)
    config, profile_path = load_plan_config(Path(args.config), args.overrides, args.target_step_s)
    prep = prepare(config, profile_path)  # every input check happens here, before any simulation
    if args.json:
        check_output_file(args.json, "--json")
    if args.out:
        check_output_dir(args.out, "--out")
    console = make_console(stderr=True)
    total = (len(prep.found.feasible) if prep.found else 0) + (1 if config.placement else 0)
    if prep.found and prep.found.rejected:
        console.print(
            f"{len(prep.found.rejected)} placement(s) of the grid do not fit the cluster and are "
            "skipped (reasons in the JSON's `rejected`)"
        )
    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=total)
        outcome = execute(prep, on_progress=lambda label: bar.update(task, advance=1, description=label))
    out = make_console()
    for warning in outcome.warnings:
        out.print(f"[yellow]warning:[/yellow] {warning}")
    summary = provenance_summary(prep.profile.provenance, prep.profile.sources)
    if summary:  # a sourced profile: say what is published and what is assumed before any number
        out.print(f"[cyan]sourced vs assumed:[/cyan] {provenance_line(summary)}")
    if outcome.ranked:
        out.print(
            ranked_table(
                outcome.ranked,
                f"{config.name}: {len(outcome.ranked)} placements, {config.search.objective if config.search else ''}",
                args.top,
                config.target_step_s,
            )
        )
    if outcome.baseline is not None and outcome.ranked:
        print_plan(out, outcome.baseline, "given placement")
    print_plan(out, outcome.chosen, "chosen plan" if outcome.ranked else "given placement")
    json_path = args.json or (args.out / "plan.json" if args.out else None)
    if args.out:
        if outcome.ranked:
            plot_share_curves(outcome.ranked, args.out / "step_time_vs_scoring_share.png")
        plot_plan(outcome.chosen, args.out / "plan_utilisation.png")
    if json_path:
        atomic_write_json(json_path, outcome.as_dict())
        out.print(f"wrote {json_path}" + (f" and plots in {args.out}" if args.out else ""))
    return 0


def _is_gpu_run(config: str) -> bool:
    path = Path(config)
    return path.is_file() and is_gpu_run(path)


def _check_plan_args(args: argparse.Namespace) -> None:
    if args.config is None:
        raise RlsimError(
            "give a cluster YAML (rlsim plan CLUSTER.yaml), or validate a profile against the real "
            "loop with `rlsim plan validate [VALIDATION.yaml]`"
        )
    if args.validation is not None:
        raise RlsimError(
            f"rlsim plan takes one cluster YAML, not two ({args.config}, {args.validation}); "
            "a validation set goes after `validate`: rlsim plan validate VALIDATION.yaml"
        )
    if args.target_step_s is not None and args.target_step_s <= 0:
        raise RlsimError(f"--target-step-s must be > 0 seconds (got {args.target_step_s})")


def _validate(args: argparse.Namespace) -> int:

    from rlsim.planner.validate.command import validate_command, validation_table

    path = _validation_set(args)
    out = args.out or Path("runs") / "validate"
    json_path = args.json or out / "validate.json"
    report = validate_command(path, args.overrides, args.profile, out, json_path, args.reuse, anchored=args.anchored)
    console = make_console()
    console.print(validation_table(report))
    console.print(f"wrote {json_path} (loop runs in {out})")
    return 0


def _validation_set(args: argparse.Namespace) -> Path:
    """The validation set the command line names (``validate PATH`` or the deprecated ``--validate PATH``)."""
    if args.validate is not None:
        print(
            "note: `rlsim plan --validate` is deprecated; use `rlsim plan validate [VALIDATION.yaml]`", file=sys.stderr
        )
        if args.config is not None:
            raise RlsimError(
                "--validate takes its validation set as its own argument: "
                "rlsim plan validate VALIDATION.yaml (drop the cluster YAML)"
            )
        given = Path(args.validate) if args.validate != _DEFAULT else None
    else:
        given = args.validation
    if given is not None:
        return given
    default = CHECKOUT_CONFIGS / "validate_cpu.yaml"
    if not default.is_file():
        raise RlsimError(
            "no validation set given, and this rlsim has no configs/ beside it (an installed package "
            "ships none): name one, e.g. rlsim plan validate path/to/validate_cpu.yaml"
        )
    return default
