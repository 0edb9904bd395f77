"""``rlsim profile CONFIG --out PROFILE``: measure what the planner's simulation needs on this machine.

Example: ``rlsim profile configs/profiles/measure_cpu.yaml --out out/profile_cpu.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "profile",
        help="measure scorer latency, generation, update and contention into a planner profile (JSON)",
        description=__doc__,
    )
    p.add_argument("config", type=Path, help="profile YAML (runtimes, grid, loop results, contention results)")
    p.add_argument("--out", type=Path, required=True, help="profile JSON to write")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set repeats=5 (repeatable)")
    p.add_argument("--fill-from", type=Path, default=None,
                   help="copy sections this run cannot measure from another profile (listed as unmeasured)")
    p.add_argument("--no-scorers", action="store_true",
                   help="skip timing real scorers (fit only from the loop/contention results given)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rlsim.config_loader import load_config
    from rlsim.planner.profile import load_profile, save_profile
    from rlsim.planner.profiling import ProfileConfig, build_profile

    config = load_config(ProfileConfig, args.config, args.overrides)
    fill = load_profile(args.fill_from) if args.fill_from else None
    console = Console(stderr=True)
    cells = len(config.runtimes) * len(config.units) * len(config.batch_sizes) * len(config.lengths)
    with Progress(TextColumn("measuring"), BarColumn(), TimeElapsedColumn(), TextColumn("{task.description}"),
                  console=console, transient=True) as bar:
        task = bar.add_task("", total=cells if not args.no_scorers else 0)
        built = build_profile(config, args.config.resolve().parent, measure=not args.no_scorers, fill_from=fill,
                              on_cell=lambda label: bar.update(task, advance=1, description=label))
    save_profile(built.profile, args.out)
    out = Console()
    out.print(f"wrote {args.out} ({built.profile.hardware_kind}, rlsim {built.profile.rlsim_version})")
    for line in built.measured:
        out.print(f"  [green]measured[/green]  {line}")
    for line in built.unmeasured:
        out.print(f"  [yellow]not measured[/yellow]  {line}")
    missing = [s for s in ("generation", "trainer", "contention") if getattr(built.profile, s) is None]
    if missing:
        out.print(f"[yellow]the planner needs {', '.join(missing)} as well[/yellow]: give loop_runs / "
                  "contention_results in the config, or --fill-from a profile that has them")
    return 0
