"""``rlsim bench scoring``: throughput of runtimes x batchers x batch sizes, with confidence intervals.

Examples::

    rlsim bench scoring --quick                                  # about a minute: one runtime, 3 batchers
    rlsim bench scoring --runtimes eager,ort,native --batch-sizes 8,32,64 --budgets 8192 --repeats 5
    rlsim bench scoring --set workload.response.mean=300 --set workload.count=128

Each cell is measured in ``--repeats`` fresh processes (warm-up, then one timed pass over the
workload), rounds interleaved. Outputs in ``--out``: results.json, cells.csv, samples.csv,
raw_samples.json, throughput.png, throughput_vs_batch.png, padding_waste.png. The last stdout line
is the results JSON: ``{"gemm_gflops", "peaks": {"fp32"|"bf16"|"int8": {"gflops"} or {"skipped"}}, "cells":
[{"cell", "runtime", "batcher", "batch_size", "token_budget", "padding_waste", "gemm_fraction", "precision",
"peak_fraction", "pair_flip_rate", "fidelity_ok", "throughput_seq_s": {"mean", "ci_low", "ci_high", ...},
"throughput_tok_s", "latency_ms": {"p50", "p95", "p99"}, ...}], "comparisons": [{"cell", "baseline", "ratio",
"ratio_ci_low", "ratio_ci_high", "ci_overlap", "p_value"}], "targets": {..., "fastest_passing_vs_eager"}, ...}``.
A custom runtime registered with ``@register_scorer`` in your own module joins the grid when the
module is named with ``--import pkg.module`` or in ``RLSIM_PLUGINS=pkg.module`` (imported here and
in every worker).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlsim.batching import batcher_names
from rlsim.bench.scoring_config import BenchScoringConfig, add_plugins, issue_workload
from rlsim.bench.scoring_report import table, write_outputs
from rlsim.bench.scoring_runner import preflight, run_grid
from rlsim.bench.scoring_worker import scorer_settings
from rlsim.cli.common import (
    add_import_arg,
    add_model_arg,
    add_reward_config_arg,
    add_settings_args,
    at_least_two,
    int_list,
    non_negative_int,
    positive_float,
    positive_int,
    settings_from_args,
)
from rlsim.config_loader import apply_overrides, load_yaml, validate
from rlsim.fidelity.cache import cached_runtime_fidelity
from rlsim.fingerprint import gemm_key, machine_fingerprint
from rlsim.io import atomic_write_json, check_output_dir
from rlsim.models import resolve_reward_model
from rlsim.rewards.options import read_reward_sections
from rlsim.scoring.base import SCORERS, runtime_names
from rlsim.workloads import read_texts

QUICK = {"batch_sizes": [8], "budgets": [2048], "repeats": 2, "warmup_passes": 1}
QUICK_COUNT = 32


def add_arguments(p: argparse.ArgumentParser) -> None:
    kinds = p.add_subparsers(dest="bench_kind", metavar="KIND", required=True)
    s = kinds.add_parser("scoring", help="runtimes x batchers x batch sizes on a workload",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    add_model_arg(s)
    s.add_argument(
        "--runtimes", default=None, help="comma-separated runtimes or 'all' (default eager,ort; quick: eager)"
    )
    s.add_argument(
        "--batchers",
        default=None,
        help="comma-separated offline batchers (default: every registered one: fixed,sorted,token-budget)",
    )
    s.add_argument("--batch-sizes", type=int_list, default=None, help="for fixed/sorted (default 8,32,64)")
    s.add_argument(
        "--budgets", type=int_list, default=None, help="token-budget: padded tokens per batch (default 8192)"
    )
    s.add_argument("--repeats", type=at_least_two, default=None, help="fresh processes per cell, >= 2 (default 5)")
    s.add_argument(
        "--warmup", type=non_negative_int, default=None, help="untimed passes over the workload per process (default 1)"
    )
    s.add_argument("--count", type=positive_int, default=None, help="texts in the workload (default 256; quick: 32)")
    s.add_argument("--seed", type=non_negative_int, default=None, help="workload seed (default 0)")
    s.add_argument("--workload-file", default=None, help="score real texts: .jsonl with 'text', or .txt")
    s.add_argument(
        "--baseline", default=None, help="cell to compare against (default eager/fixed/32; quick: R/fixed/8)"
    )
    s.add_argument(
        "--worker-timeout", type=positive_float, default=None, help="seconds one repeat may take (default 1800)"
    )
    s.add_argument("--config", default=None, help="YAML with BenchScoringConfig fields; flags override it")
    s.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override, e.g. workload.response.mean=300"
    )
    s.add_argument("--quick", action="store_true", help="small grid that finishes in about a minute")
    s.add_argument("--out", default="runs/bench-scoring", help="output folder (default runs/bench-scoring)")
    add_settings_args(s)
    add_import_arg(s)
    add_reward_config_arg(s)
    s.set_defaults(func=run)


def _runtime_list(spec: str, runtime_names) -> list[str]:
    """``all`` / ``variants`` expand to registry names; other names are kept for the config's validation to judge."""
    out: list[str] = []
    for item in (r.strip() for r in spec.split(",") if r.strip()):
        out += runtime_names(variants=item == "variants") if item in ("all", "variants") else [item]
    return list(dict.fromkeys(out))


def build_config(args: argparse.Namespace):
    """Flags (+ ``--config`` file, ``--set`` overrides) -> ``BenchScoringConfig``; all errors at once."""
    add_plugins(args.imports)  # before any runtime is checked; workers inherit them through RLSIM_PLUGINS
    data: dict[str, Any] = load_yaml(args.config) if args.config else {}
    runtimes = args.runtimes or ("eager" if args.quick else None)
    if runtimes:
        data["runtimes"] = _runtime_list(runtimes, runtime_names)
    data["model"] = args.model
    if args.batchers is not None or "batchers" not in data:
        data["batchers"] = [b.strip() for b in (args.batchers or ",".join(batcher_names())).split(",") if b.strip()]
    if args.quick:
        data.update(QUICK)
        first = (data.get("runtimes") or ["eager"])[0]
        data["baseline"] = f"{first}/fixed/8"
    workload = data.setdefault("workload", issue_workload().model_dump(mode="json", exclude_none=True))
    flags = {"batch_sizes": args.batch_sizes, "budgets": args.budgets, "repeats": args.repeats,
             "warmup_passes": args.warmup, "baseline": args.baseline,
             "worker_timeout_s": args.worker_timeout}  # fmt: skip
    data.update({k: v for k, v in flags.items() if v is not None})
    count = args.count if args.count is not None else (QUICK_COUNT if args.quick else None)
    for key, value in (("count", count), ("seed", args.seed), ("path", args.workload_file)):
        if value is not None:
            workload[key] = value
    settings = asdict(settings_from_args(args))
    settings["compile_buckets"] = list(settings["compile_buckets"])
    settings.pop("options")  # a reward's settings come per runtime, from `reward:` (--reward-config)
    if args.reward_config:
        data["reward"] = {**data.get("reward", {}), **read_reward_sections(args.reward_config)}
    data["settings"] = {**settings, **data.get("settings", {})}
    apply_overrides(data, args.set)
    return validate(BenchScoringConfig, data, source="rlsim bench scoring options")


def _fidelity(cfg) -> dict:
    """Each runtime's fidelity; read from this machine's cache where a clean entry exists (rlsim.fidelity.cache).
    A reward that is no model (a function, a sandbox, a judge) is not compared with the reward model: skipped,
    saying so."""
    models = [r for r in cfg.runtimes if SCORERS.info(r).kind == "model"]
    out = (
        cached_runtime_fidelity(resolve_reward_model(cfg.model), models, scorer_settings(cfg.settings))
        if models
        else {}
    )
    for r in cfg.runtimes:
        if r not in models:
            kind = SCORERS.info(r).kind
            out[r] = {
                "skipped": f"{r} is a reward that is no model (kind {kind}): nothing to compare with the reward model"
            }
    return out


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from rlsim.bench.scoring_summary import add_fidelity, summarize
    from rlsim.progress import LineProgress, make_console

    err = make_console(stderr=True)
    cfg = build_config(args)
    check_output_dir(args.out, "--out")
    if cfg.workload.path is not None:  # before preflight loads the tokenizer
        read_texts(cfg.workload.path)
    with err.status("checking runtimes, budgets and the workload ..."):
        cells, info = preflight(cfg)
    out = Path(args.out)
    err.print(f"{len(cells)} cells x {cfg.repeats} repeats, {info['sequences']} texts "
              f"(mean {info['mean_tokens']:.0f} tokens, max {info['max_tokens']}); results in {out}")  # fmt: skip
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with LineProgress(*columns, console=err) as bar:
        task = bar.add_task("starting", total=len(cells) * cfg.repeats + 2)
        raw, gemm = run_grid(
            cfg, cells, out, lambda what, done, total: bar.update(task, description=what, completed=done)
        )
    result = summarize(cfg, cells, raw, gemm, info)
    if cfg.fidelity:
        with err.status("scoring the fidelity corpus with each runtime (pair flips vs fp32 eager) ..."):
            add_fidelity(result, _fidelity(cfg))
    result["machine"] = machine_fingerprint(
        {gemm_key(g["device"], g["n"], g["threads"]): g["gflops"] for g in gemm[:1]}
    )
    atomic_write_json(out / "results.json", result)
    paths = write_outputs(result, raw, out)
    out_console = make_console()
    out_console.print(table(result))
    err.print("wrote " + ", ".join(str(p) for p in [out / "results.json", *paths]))
    print(json.dumps(result, allow_nan=False))
    return 0
