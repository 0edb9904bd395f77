"""``rlsim verify``: every runtime against the PyTorch eager reference on one fixed batch."""

from __future__ import annotations

import argparse

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from rlsim.cli.common import add_model_arg, add_settings_args, correlation, fraction, settings_from_args
from rlsim.corpus.agreement import FidelityRules
from rlsim.errors import RlsimError
from rlsim.fidelity.verify import verify
from rlsim.io import atomic_write_json, check_output_file
from rlsim.models import resolve_reward_model
from rlsim.progress import LineProgress, make_console
from rlsim.scoring import SCORERS, expand_runtimes
from rlsim.scoring.int8_sensitivity import sensitivity


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arg(p)
    p.add_argument(
        "--runtimes",
        default=None,
        help="comma-separated runtimes; 'all' (the core ones, the default) and 'variants' (bf16/fp16, static int8) "
        "expand; with --fidelity the default is all,variants",
    )
    p.add_argument("--json", default=None, help="write the report as JSON to this path")
    p.add_argument(
        "--fidelity",
        action="store_true",
        help="also score the fidelity corpus (~330 stdlib paragraphs in groups) and judge reduced precision by "
        "within-group pair flips and Spearman there",
    )
    p.add_argument(
        "--sensitivity",
        action="store_true",
        help="instead: quantize each node of the model's fp32 ONNX graph that ort-int8 quantizes (weight "
        "MatMul/Gemm, embedding Gather) to int8 on its own and rank them by the pair flips and Spearman they cost "
        "on the fidelity corpus's calibration split (rlsim.scoring.int8_sensitivity)",
    )
    p.add_argument(
        "--sensitivity-by",
        choices=("layer", "group"),
        default="layer",
        help="with --sensitivity: one node at a time (layer, the default) or one kind at a time (group: "
        "embedding, attention, ffn, pooler, head)",
    )
    p.add_argument("--max-pair-flip-rate", type=fraction, default=0.02, help="fidelity pass rule (default 0.02)")
    p.add_argument("--min-spearman", type=correlation, default=0.99, help="fidelity pass rule (default 0.99)")
    add_settings_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    console = make_console(stderr=True)
    if args.json:
        check_output_file(args.json, "--json")  # now, not after minutes of scoring
    if args.sensitivity:
        return _sensitivity(args, console)
    runtimes = expand_runtimes(args.runtimes or ("all,variants" if args.fidelity else "all"))
    not_models = [r for r in runtimes if SCORERS.info(r).kind != "model"]
    if not_models:
        raise RlsimError(
            f"--runtimes: {', '.join(not_models)} score without a reward model (kind "
            f"{SCORERS.info(not_models[0]).kind}), so there is nothing to compare with fp32 eager; verify takes "
            "reward-model runtimes only (see docs/rewards.md for how those rewards are tested)"
        )
    rules = FidelityRules(args.max_pair_flip_rate, args.min_spearman) if args.fidelity else None
    spec = resolve_reward_model(args.model)
    with console.status("scoring the reference batch with eager ...") as status:
        report = verify(
            spec,
            runtimes,
            settings_from_args(args),
            on_done=lambda name, r: status.update(f"{name}: {'ok' if r.ok else 'FAILED'}; next ..."),
            fidelity=rules,
        )
    make_console().print(_table(report))
    if report.reward_head:
        head = report.reward_head
        console.print(
            f"reward head: {head['heldout_accuracy']:.1%} pairwise accuracy on {head['heldout_pairs']} held-out "
            f"pairs ({head['task']})"
        )
    if args.json:
        atomic_write_json(args.json, report.as_dict())
        console.print(f"wrote {args.json}")
    return 0 if report.ok else 1


def _table(report):
    t = Table(title=f"rlsim verify: {report.model} vs {report.reference} ({report.texts} texts)")
    fid = report.rules is not None
    cols = ["runtime", "ok", "max|diff|", "max rel", "rho", "load s", "compile s", "note"]
    if fid:
        cols[5:5] = ["corpus rho", "pair flips", "adv sign flips", "adv MAE"]
    for col in cols:
        t.add_column(col)
    for name, r in report.runtimes.items():
        fmt = lambda v: "-" if v is None else f"{v:.2e}"  # noqa: E731
        note = r.error or ("" if r.precision == "fp32" else r.precision)
        ok = "[yellow]skipped[/]" if r.skipped else "[green]yes[/]" if r.ok else "[red]NO[/]"
        row = [name, ok, fmt(r.max_abs_diff), fmt(r.max_rel_diff), "-" if r.spearman is None else f"{r.spearman:.3f}"]
        if fid:
            f = r.fidelity or {}
            row += (
                [
                    f"{f['spearman']:.4f}",
                    f"{f['pair_flip_rate']:.1%}",
                    f"{f['advantage_sign_flip_rate']:.1%}",
                    f"{f['advantage_mae']:.3f}",
                ]
                if f
                else ["-"] * 4
            )
        t.add_row(*row, f"{r.load_s:.1f}", f"{r.compile_s:.1f}", note)
    return t


def _sensitivity(args: argparse.Namespace, console) -> int:

    if args.runtimes or args.fidelity:
        raise RlsimError(
            "--sensitivity ranks the layers of the model's own int8 graph, so it takes neither --runtimes nor "
            "--fidelity; run those as a separate rlsim verify"
        )
    spec = resolve_reward_model(args.model)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with LineProgress(*columns, console=console) as bar:
        task = bar.add_task("scoring the calibration split with the fp32 graph", total=None)
        report = sensitivity(
            spec,
            settings_from_args(args),
            by=args.sensitivity_by,
            progress=lambda what, done, total: bar.update(task, description=what, completed=done, total=total),
        )
    make_console().print(_sensitivity_table(report, args.max_pair_flip_rate, args.min_spearman))
    if args.json:
        atomic_write_json(args.json, report)
        console.print(f"wrote {args.json}")
    return 0


def _sensitivity_table(report, max_flips: float, min_spearman: float):
    c = report["corpus"]
    t = Table(
        title=f"rlsim verify --sensitivity: {report['model']}, one {report['by']} in int8 at a time, most harmful "
        f"first ({c['texts']} calibration texts in {c['groups']} groups, against the fp32 graph)"
    )
    for col in ("unit", "group", "pair flips", "Spearman", "max|diff|", "alone passes"):
        t.add_column(col)
    rows = [*report["units"], {"unit": "all int8 (ort-int8)", "group": "-", **report["all_int8"]}]
    for u in rows:
        passes = u["pair_flip_rate"] <= max_flips and u["spearman"] >= min_spearman
        t.add_row(
            u["unit"],
            u["group"],
            f"{u['pair_flip_rate']:.1%}",
            f"{u['spearman']:.4f}",
            f"{u['max_abs_diff']:.2e}",
            "[green]yes[/]" if passes else "[red]no[/]",
        )
    return t
