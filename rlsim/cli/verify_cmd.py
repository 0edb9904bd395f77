"""``rlsim verify``: every runtime against the PyTorch eager reference on one fixed batch."""

from __future__ import annotations

import argparse

from rlsim.cli.common import add_model_arg, add_settings_args, settings_from_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="compare every scoring runtime with the PyTorch eager reference")
    add_model_arg(p)
    p.add_argument("--runtimes", default="all", help="comma-separated runtimes, or 'all' (default)")
    p.add_argument("--json", default=None, help="write the report as JSON to this path")
    add_settings_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from rlsim.io import atomic_write_json, check_output_file
    from rlsim.models import resolve_reward_model
    from rlsim.scoring import expand_runtimes
    from rlsim.scoring.verify import verify

    console = Console(stderr=True)
    if args.json:
        check_output_file(args.json, "--json")  # now, not after minutes of scoring
    runtimes = expand_runtimes(args.runtimes)
    spec = resolve_reward_model(args.model)
    with console.status("scoring the reference batch with eager ...") as status:
        report = verify(
            spec,
            runtimes,
            settings_from_args(args),
            on_done=lambda name, r: status.update(f"{name}: {'ok' if r.ok else 'FAILED'}; next ..."),
        )
    Console().print(_table(report))
    if args.json:
        atomic_write_json(args.json, report.as_dict())
        console.print(f"wrote {args.json}")
    return 0 if report.ok else 1


def _table(report):
    from rich.table import Table

    t = Table(title=f"rlsim verify: {report.model} vs {report.reference} ({report.texts} texts)")
    for col in ("runtime", "ok", "max|diff|", "max rel", "rho", "load s", "compile s", "note"):
        t.add_column(col)
    for name, r in report.runtimes.items():
        fmt = lambda v: "-" if v is None else f"{v:.2e}"  # noqa: E731
        note = r.error or ("int8" if r.int8 else "")
        t.add_row(
            name,
            "[green]yes[/]" if r.ok else "[red]NO[/]",
            fmt(r.max_abs_diff),
            fmt(r.max_rel_diff),
            "-" if r.spearman is None else f"{r.spearman:.3f}",
            f"{r.load_s:.1f}",
            f"{r.compile_s:.1f}",
            note,
        )
    return t
