"""``rlsim experiment contention CONFIG [--quick] [--repeats R] [--target-ci F] [--max-minutes M] [--runtimes LIST]
[--fidelity FILE] [--out DIR] [--set a.b=c]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlsim.cli.common import add_import_arg, at_least_two, import_plugins, positive_float
from rlsim.errors import RlsimError
from rlsim.experiment.config import load_contention_config
from rlsim.io import check_output_dir
from rlsim.progress import make_console
from rlsim.scoring.base import expand_runtimes
from rlsim.workloads import read_texts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = "Experiments that run the RLHF loop under several conditions and compare them."
    kinds = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    c = kinds.add_parser(
        "contention",
        help="per scoring runtime on a shared pool: generation alone, scoring alone, together, time-boxed",
        description="Measure step time, scoring cost, contention and the capacity a faster runtime frees, in R "
        "repeats (each a fresh Ray session); writes results.json, report.md and PNGs into --out.",
    )
    c.add_argument("config", help="YAML config, e.g. configs/contention_cpu.yaml")
    c.add_argument(
        "--quick",
        action="store_true",
        help="the config's quick variant (fewer runtimes, repeats and a shorter time box)",
    )
    c.add_argument(
        "--repeats",
        type=at_least_two,
        default=None,
        help="exactly this many repeats (>= 2), overriding the config (and its max_minutes unless "
        "--max-minutes is given too)",
    )
    c.add_argument(
        "--target-ci",
        type=positive_float,
        default=None,
        metavar="FRACTION",
        help="repeat (at least 3 times) until every runtime's freed core-s CI half-width is at most this "
        "share of its mean, e.g. 0.10, or --max-minutes is spent (with --repeats: only reported)",
    )
    c.add_argument(
        "--max-minutes",
        type=positive_float,
        default=None,
        metavar="M",
        help="time budget: start no repeat that would end past M minutes (at the mean repeat time)",
    )
    c.add_argument("--runtimes", default=None, help="comma-separated runtimes or 'all', e.g. eager,native")
    c.add_argument(
        "--fidelity",
        default=None,
        metavar="FILE",
        help="each runtime's reward fidelity from this `rlsim verify --fidelity --json` output instead of "
        "measuring it at the start (the report ranks runtimes that pass it by freed capacity)",
    )
    c.add_argument("--out", default=None, help="output folder (default runs/contention[-quick])")
    c.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set contention.timebox.budget_s=8 (repeatable)",
    )
    c.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    add_import_arg(c)  # also imported in every scoring actor (it joins loop.reward.imports)
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    import_plugins(args)  # before any runtime name is checked
    runtimes = None
    if args.runtimes is not None:
        try:
            runtimes = expand_runtimes(args.runtimes)
        except Exception as err:  # noqa: BLE001  (the registry names the valid runtimes)
            raise RlsimError(f"--runtimes {args.runtimes!r}: {err}") from None
    # Everything is validated before Ray or any model starts: a bad config starts nothing.
    config = load_contention_config(
        args.config,
        args.overrides,
        quick=args.quick,
        repeats=args.repeats,
        runtimes=runtimes,
        target_ci=args.target_ci,
        max_minutes=args.max_minutes,
        fidelity_file=args.fidelity,
    )
    reward = config.loop.reward
    reward.imports = list(dict.fromkeys([*reward.imports, *args.imports]))
    out = Path(args.out) if args.out else Path("runs") / ("contention-quick" if args.quick else "contention")
    check_output_dir(out, "--out")
    if config.loop.workload.spec.path is not None:  # read by the rollout actor; bad text must fail before Ray starts
        read_texts(config.loop.workload.spec.path)

    from rlsim.experiment.runner import run_contention

    console = make_console(stderr=True)
    results = run_contention(config, out, console=console, show_progress=not args.no_progress)
    for line in results["conclusions"]:
        console.print(f"- {line}")
    console.print(f"results in {out}/ (results.json, report.md, pool_time.png, step_vs_cost.png, generation.png)")
    summary = {
        "out": str(out),
        "complete": results["complete"],
        "elapsed_s": results["elapsed_s"],
        "freed_core_s": {k: v["freed_core_s"]["mean"] for k, v in results["runtimes"].items()},
        "gen_slowdown": {k: v["gen_slowdown"]["mean"] for k, v in results["runtimes"].items()},
        "passes_fidelity": {k: (v.get("fidelity") or {}).get("ok") for k, v in results["runtimes"].items()},
        "best_passing": (results.get("ranking") or {}).get("best"),
        "repeats_done": results["repeats_done"],
        "stopped": results["stopping"]["reason"],
        "freed_ci_half_width_fraction": {
            k: v["precision"]["half_width_fraction"] for k, v in results["runtimes"].items() if "precision" in v
        },
    }
    # PPO and async: where each compared runtime's freed capacity went (absent for GRPO)
    figures = results["runtimes"]
    roles = {k: v["roles"]["destination"] for k, v in figures.items() if "destination" in v.get("roles", {})}
    outcomes = {k: v["async"]["freed_went_to"] for k, v in figures.items() if "freed_went_to" in v.get("async", {})}
    summary.update({"roles_destination": roles} if roles else {})
    summary.update({"async_freed_went_to": outcomes} if outcomes else {})
    print(json.dumps(summary), file=sys.stdout)
    return 0
