"""The GPU step model against published runs: per-row step and phase errors, summary statistics.

``python -m rlsim.planner.validate.gpu_published configs/profiles/gpu_efficiency_nemo_rl.json`` prints
the table (Markdown) and, as its last line, one JSON object (``benchmarks/results/gpu_planner_validation.json``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rlsim.planner.profile.gpu_efficiency import Efficiency, load_efficiency
from rlsim.planner.sim.gpu_step import predict_step
from rlsim.planner.validate.published_runs import ASYNC_PAIRS, CALIBRATION, VALIDATION, PublishedRun


@dataclass(frozen=True)
class RowResult:
    id: str
    role: str  # calibration | validation
    gpus: int
    published_s: float
    predicted_s: float
    error: float  # predicted / published - 1
    phase_errors: dict[str, float]
    predicted_phases: dict[str, float]


def evaluate(row: PublishedRun, role: str, eff: Efficiency) -> RowResult:
    pred = predict_step(row.config, eff)
    p = pred.phases
    mine = {
        "generation": p["generation"],
        "logprobs": p["logprobs_old"] + p["logprobs_ref"],
        "training": p["training"],
        "refit": p["refit"],
        "overhead": p["overhead"],
    }
    phase_err = {k: mine[k] / v - 1 for k, v in row.phases.items()}
    return RowResult(
        row.id,
        role,
        row.config.gpus,
        row.step_s,
        round(pred.step_s, 2),
        round(pred.step_s / row.step_s - 1, 4),
        {k: round(v, 4) for k, v in phase_err.items()},
        {k: round(v, 2) for k, v in mine.items()},
    )


def report(eff: Efficiency) -> dict[str, object]:
    rows = [evaluate(r, "calibration", eff) for r in CALIBRATION] + [evaluate(r, "validation", eff) for r in VALIDATION]
    val = np.array([abs(r.error) for r in rows if r.role == "validation"])
    moe = {r.id for r in VALIDATION if r.config.shape.is_moe}
    families = {}
    for family, ids in (("dense", {r.id for r in VALIDATION} - moe), ("moe", moe)):
        errs = np.array([abs(r.error) for r in rows if r.id in ids])
        families[family] = {
            "rows": len(errs),
            "median_abs_error": round(float(np.median(errs)), 4),
            "worst_abs_error": round(float(errs.max()), 4),
        }
    by_id = {r.id: r for r in rows}
    ratios: list[dict[str, object]] = []
    for a, s in ASYNC_PAIRS:
        published = by_id[a].published_s / by_id[s].published_s
        predicted = by_id[a].predicted_s / by_id[s].predicted_s
        ratios.append(
            {
                "async": a,
                "sync": s,
                "published": round(published, 3),
                "predicted": round(predicted, 3),
                "error": round(predicted / published - 1, 4),
                "family": "moe" if a in moe else "dense",
            }
        )
    return {
        "rows": [asdict(r) for r in rows],
        "validation_median_abs_error": round(float(np.median(val)), 4),
        "validation_worst_abs_error": round(float(val.max()), 4),
        "validation_by_family": families,
        "async_sync_ratios": ratios,
        "fitted_on": eff.fitted_on,
    }


def markdown(rep: dict[str, object]) -> str:
    lines = [
        "| row | role | GPUs | published s | predicted s | error | phase errors |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = rep["rows"]
    assert isinstance(rows, list)
    for r in rows:
        phases = ", ".join(f"{k} {v:+.0%}" for k, v in r["phase_errors"].items())
        lines.append(
            f"| {r['id']} | {r['role']} | {r['gpus']} | {r['published_s']:g} | {r['predicted_s']:g} | "
            f"{r['error']:+.1%} | {phases} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    eff = load_efficiency(Path(argv[0]))
    rep = report(eff)
    print(markdown(rep))
    print(json.dumps(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
