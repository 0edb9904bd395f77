"""``rlsim run CONFIG [--set a.b=c ...] [--out DIR]``: simulated GRPO steps on Ray (the main job)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from rlsim.cli.common import add_import_arg, import_plugins
from rlsim.io import check_output_dir
from rlsim.loop.config import load_run_config
from rlsim.progress import make_console
from rlsim.workloads import read_texts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Run N steps of the config's algorithm (GRPO, RLOO or PPO: trainer.algorithm) and write results.json, "
        "timeline.json, report.md and PNGs into --out, rewritten after every step."
    )
    p.add_argument("config", help="YAML config, e.g. configs/default.yaml")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set steps=5 --set placement.preset=split (repeatable)",
    )
    p.add_argument("--out", default=None, help="output folder (default runs/<config name>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")
    p.add_argument(
        "--tensorboard",
        default=None,
        metavar="DIR",
        help="also write each step's metrics (verl's names: timing_s/*, perf/*, ...) as TensorBoard scalars into DIR",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run saved in --out after its last completed step (same config)",
    )
    add_import_arg(p)  # also imported in every scoring actor (it joins reward.imports)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    # Plug-ins first, so their runtimes are known when the config is checked; then validate everything
    # before importing Ray or starting anything: a bad config starts nothing.
    import_plugins(args)
    config = load_run_config(args.config, args.overrides)
    config.reward.imports = list(dict.fromkeys([*config.reward.imports, *args.imports]))
    out = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    check_output_dir(out, "--out")
    if config.workload.spec.path is not None:  # read by the rollout actor; bad text must fail before Ray starts
        read_texts(config.workload.spec.path)

    from rlsim.loop.run import run_loop, summary_lines

    console = make_console(stderr=True)
    again = " ".join(
        [
            "rlsim run",
            shlex.quote(args.config),
            *(f"--set {shlex.quote(o)}" for o in args.overrides),
            "--out",
            shlex.quote(str(out)),
            "--resume",
        ]
    )
    results = run_loop(
        config,
        out,
        console=console,
        show_progress=not args.no_progress,
        resume=args.resume,
        resume_hint=again,
        tensorboard=Path(args.tensorboard) if args.tensorboard else None,
    )
    for line in summary_lines(results):
        console.print(line)
    console.print(f"results in {out}/ (results.json, timeline.json, trace.json, report.md, gantt.png, breakdown.png)")
    print(
        json.dumps({"out": str(out), "steps": len(results.steps), "overhead_fraction": results.overhead_fraction}),
        file=sys.stdout,
    )
    return 0
