"""People-facing outputs of the scoring benchmark: a rich table, CSV files and PNG plots."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from rlsim.bench.scoring_plots import plot_all
from rlsim.io import atomic_write_bytes, atomic_write_text

CSV_COLUMNS = [
    "cell", "runtime", "batcher", "batch_size", "token_budget", "repeats", "seq_s_mean", "seq_s_ci_low",
    "seq_s_ci_high", "ci_half_width_pct", "cv", "tok_s_mean", "latency_p50_ms", "latency_p95_ms",
    "latency_p99_ms", "padding_waste", "gemm_fraction", "mean_batch_size", "ratio_vs_baseline",
    "ratio_ci_low", "ratio_ci_high", "ci_overlap", "p_value", "paired_ratio", "paired_ratio_ci_low",
    "paired_ratio_ci_high", "p_value_paired", "sign_flip_p", "pair_flip_rate", "fidelity_ok", "precision",
    "peak_fraction",
]  # fmt: skip


def ratio_text(cmp: dict[str, Any]) -> str:
    """``1.62 [1.40, 1.85]``; an unbounded Fieller side (null in the JSON) prints as ``inf``."""
    low = "-inf" if cmp["ratio_ci_low"] is None else f"{cmp['ratio_ci_low']:.2f}"
    high = "inf" if cmp["ratio_ci_high"] is None else f"{cmp['ratio_ci_high']:.2f}"
    return f"{cmp['ratio']:.2f} [{low}, {high}]"


def paired_text(cmp: dict[str, Any]) -> str:
    """``2.00 [1.95, 2.05]``: the per-round (paired) ratio; ``-`` with fewer than two rounds."""
    if cmp.get("paired_ratio") is None:
        return "-"
    return f"{cmp['paired_ratio']:.2f} [{cmp['paired_ratio_ci_low']:.2f}, {cmp['paired_ratio_ci_high']:.2f}]"


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(result: dict[str, Any]):
    """A rich ``Table``: one row per cell, ratios against the baseline."""
    from rich.table import Table

    comp = {c["cell"]: c for c in result["comparisons"]}
    t = Table(
        title=f"rlsim bench scoring: {result['model']}, {result['workload']['sequences']} texts, "
        f"{result['repeats']} repeats, GEMM {result['gemm_gflops']:.0f} GFLOP/s",
        caption="seq/s: mean [95% t-interval]; vs base: ratio [Fieller 95%], p: Mann-Whitney U (unpaired); "
        "paired: per-round ratio [95% t on log-ratios], p: paired t; flips: within-group pair flips vs fp32 eager "
        "on the fidelity corpus (FAIL: outside the fidelity rules); GEMM: fraction of the fp32 GEMM rate, own peak: "
        f"of the cell's precision's GEMM rate ({peaks_text(result.get('peaks', {}))})",
    )
    for col in (
        "cell",
        "seq/s",
        "±%",
        "CV",
        "tok/s",
        "p50/p99 ms",
        "waste",
        "GEMM",
        "own peak",
        "flips",
        "vs base",
        "p",
        "paired",
        "p paired",
    ):
        t.add_column(col, justify="left" if col == "cell" else "right")
    for c in result["cells"]:
        s = c["throughput_seq_s"]
        cmp = comp.get(c["cell"])
        ratio = "baseline" if cmp is None else ratio_text(cmp)
        t.add_row(
            c["cell"],
            f"{s['mean']:.1f} [{s['ci_low']:.1f}, {s['ci_high']:.1f}]",
            f"{s['ci_half_width_pct']:.1f}",
            f"{s['cv']:.3f}",
            f"{c['throughput_tok_s']['mean']:.0f}",
            f"{c['latency_ms']['p50']:.0f}/{c['latency_ms']['p99']:.0f}",
            f"{c['padding_waste']:.1%}",
            "-" if c["gemm_fraction"] is None else f"{c['gemm_fraction']:.2f}",
            own_peak_text(c),
            _flips(c),
            ratio,
            "-" if cmp is None else f"{cmp['p_value']:.3f}",
            "baseline" if cmp is None else paired_text(cmp),
            "-" if cmp is None else _p(cmp.get("p_value_paired")),
        )
    return t


def own_peak_text(cell: dict[str, Any]) -> str:
    """``0.31 bf16``: throughput as a fraction of the cell's own precision's GEMM peak; ``-`` where it has none."""
    frac = cell.get("peak_fraction")
    return "-" if frac is None else f"{frac:.2f} {cell.get('precision', '')}".rstrip()


def peaks_text(peaks: dict[str, dict[str, Any]]) -> str:
    """``fp32 120, int8 610 GFLOP/s (int: GOP/s); bf16 skipped: ...``."""
    rates = ", ".join(f"{p} {v['gflops']:.0f}" for p, v in peaks.items() if "gflops" in v)
    skipped = "; ".join(f"{p} skipped: {v['skipped']}" for p, v in peaks.items() if "skipped" in v)
    return "; ".join(x for x in ((rates + " GFLOP/s (int8: G int-ops/s)") if rates else "", skipped) if x)


def _flips(cell: dict[str, Any]) -> str:
    """Pair-flip rate vs fp32 eager, marked where the runtime fails the fidelity rules."""
    rate = cell.get("pair_flip_rate")
    if rate is None:
        return "-"
    return f"{rate:.1%}" + ("" if cell.get("fidelity_ok") else " FAIL")


def csv_text(result: dict[str, Any]) -> str:
    """One CSV row per cell with the columns in ``CSV_COLUMNS``."""
    comp = {c["cell"]: c for c in result["comparisons"]}
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for c in result["cells"]:
        s, cmp = c["throughput_seq_s"], comp.get(c["cell"], {})
        writer.writerow({
            "cell": c["cell"], "runtime": c["runtime"], "batcher": c["batcher"], "batch_size": c["batch_size"],
            "token_budget": c["token_budget"], "repeats": c["repeats"], "seq_s_mean": s["mean"],
            "seq_s_ci_low": s["ci_low"], "seq_s_ci_high": s["ci_high"], "ci_half_width_pct": s["ci_half_width_pct"],
            "cv": s["cv"], "tok_s_mean": c["throughput_tok_s"]["mean"], "latency_p50_ms": c["latency_ms"]["p50"],
            "latency_p95_ms": c["latency_ms"]["p95"], "latency_p99_ms": c["latency_ms"]["p99"],
            "padding_waste": c["padding_waste"], "gemm_fraction": c["gemm_fraction"],
            "mean_batch_size": c["mean_batch_size"], "ratio_vs_baseline": cmp.get("ratio", 1.0),
            "ratio_ci_low": cmp.get("ratio_ci_low", 1.0), "ratio_ci_high": cmp.get("ratio_ci_high", 1.0),
            "ci_overlap": cmp.get("ci_overlap", True), "p_value": cmp.get("p_value", 1.0),
            "paired_ratio": cmp.get("paired_ratio", 1.0), "paired_ratio_ci_low": cmp.get("paired_ratio_ci_low", 1.0),
            "paired_ratio_ci_high": cmp.get("paired_ratio_ci_high", 1.0),
            "p_value_paired": cmp.get("p_value_paired", 1.0), "sign_flip_p": cmp.get("sign_flip_p", 1.0),
            "pair_flip_rate": c.get("pair_flip_rate"), "fidelity_ok": c.get("fidelity_ok"),
            "precision": c.get("precision"), "peak_fraction": c.get("peak_fraction"),
        })  # fmt: skip
    return buf.getvalue()


def samples_csv_text(raw: dict[str, list[dict[str, Any]]]) -> str:
    """One row per repeat: the raw material every statistic is computed from."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["cell", "repeat", "wall_s", "sequences", "real_tokens", "padded_tokens", "seq_s", "load_s"])
    for label, runs in raw.items():
        for i, r in enumerate(runs):
            seq_s = r["sequences"] / r["wall_s"]
            writer.writerow(
                [label, i, r["wall_s"], r["sequences"], r["real_tokens"], r["padded_tokens"], seq_s, r["load_s"]]
            )
    return buf.getvalue()


def markdown_summary(result: dict[str, Any]) -> str:
    """Headline table in Markdown (for a README): one row per cell, plus the targets checked."""
    comp = {c["cell"]: c for c in result["comparisons"]}
    w = result["workload"]
    lines = [
        f"Model `{result['model']}`, {w['sequences']} texts (mean {w['mean_tokens']:.0f} tokens, max "
        f"{w['max_tokens']}), {result['repeats']} repeats per cell in fresh processes, GEMM rate "
        f"{result['gemm_gflops']:.0f} GFLOP/s; peaks per precision: {peaks_text(result.get('peaks', {}))}. "
        f"Mean [95% t-interval]; ratio vs `{result['baseline']}` "
        "[Fieller 95%], p: Mann-Whitney U (both unpaired); paired: the same rounds side by side, ratio [95% t-interval "
        "on per-round log-ratios], p: paired t.",
        "",
        "| cell | seq/s | ± % | tok/s | p50 / p99 batch ms | padding waste | GEMM fraction | own peak fraction "
        "| vs baseline | p | paired | p paired |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["cells"]:
        s, cmp = c["throughput_seq_s"], comp.get(c["cell"])
        ratio = "baseline" if cmp is None else ratio_text(cmp)
        frac = "-" if c["gemm_fraction"] is None else f"{c['gemm_fraction']:.2f}"
        p = "-" if cmp is None else f"{cmp['p_value']:.3f}"
        pair = "baseline | -" if cmp is None else f"{paired_text(cmp)} | {_p(cmp.get('p_value_paired'))}"
        lines.append(
            f"| {c['cell']} | {s['mean']:.1f} [{s['ci_low']:.1f}, {s['ci_high']:.1f}] | {s['ci_half_width_pct']:.1f} "
            f"| {c['throughput_tok_s']['mean']:.0f} | {c['latency_ms']['p50']:.0f} / {c['latency_ms']['p99']:.0f} "
            f"| {c['padding_waste']:.1%} | {frac} | {own_peak_text(c)} | {ratio} | {p} | {pair} |"
        )
    return "\n".join(lines + ["", *_target_lines(result["targets"])]) + "\n"


def _target_lines(t: dict[str, Any]) -> list[str]:
    yes = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    lines = [f"Targets (this run): best cell `{t['best_cell_vs_baseline']['cell']}` is "
             f"{t['best_cell_vs_baseline']['ratio']:.2f}x the baseline (>= {t['best_cell_min_ratio']}x: "
             f"{yes(t['best_cell_vs_baseline']['meets_target'])}); largest CI half-width "
             f"{t['ci_half_width_max_pct']:.1f}% "
             f"(<= {t['ci_half_width_target_pct']}%: {yes(t['ci_within_target'])})."]  # fmt: skip
    for f in t.get("fastest_passing_vs_eager", []):
        if f["cell"] is None:
            lines.append(f"- no runtime other than eager passes fidelity at `{f['baseline']}`")
            continue
        lines.append(f"- fastest that passes fidelity: `{f['cell']}` vs `{f['baseline']}`: paired "
                     f"{paired_text(f)} (>= {t['fastest_passing_min_ratio']}x: {yes(f['meets_target'])}; "
                     f"at the CI's low end: {yes(f['ci_low_meets_target'])})")  # fmt: skip
    for g in t["best_batcher_vs_fixed"]:
        lines.append(f"- `{g['cell']}` vs `{g['baseline']}`: {ratio_text(g)} "
                     f"(>= {t['best_batcher_min_ratio']}x: {yes(g['meets_target'])}; "
                     f"at the CI's low end: {yes(g['ci_low_meets_target'])})")  # fmt: skip
    return lines


def write_outputs(result: dict[str, Any], raw: dict[str, list[dict[str, Any]]], out_dir: Path) -> list[Path]:
    """CSV files and PNG plots into ``out_dir``; returns the paths written."""
    paths = [
        atomic_write_text(out_dir / "cells.csv", csv_text(result)),
        atomic_write_text(out_dir / "samples.csv", samples_csv_text(raw)),
        atomic_write_text(out_dir / "summary.md", markdown_summary(result)),
    ]

    for name, png in plot_all(result).items():
        paths.append(atomic_write_bytes(out_dir / name, png))
    return paths
