"""Fit the GPU step model's efficiency factors on the declared calibration rows, and nothing else.

Run ``python -m rlsim.planner.profile.fitting.gpu configs/profiles/gpu_efficiency_nemo_rl.json``.

What is fitted, in order, and on which rows (``published_runs.CALIBRATION``):

1. ``train_mfu`` and ``logprob_mfu`` per backend, each from the v0.3 blog row of that backend's
   published ``training`` / ``logprobs`` phase (the model is ``A / mfu + B``: solved exactly).
2. ``refit_fixed_s``: the blog rows' mean ``refit`` phase less the modelled transfer.
3. ``step_overhead_s``: the blog rows' mean step time less the sum of their four phases.
4. ``decode_bw`` and ``decode_fixed_s``: least squares of relative errors over the blog rows'
   ``generation`` phases and the two v0.4 rows' step times (bounded: bandwidth share 0.2-0.9, the
   practical streaming ceiling).

Every other factor is ``gpu_efficiency.ASSUMED``. The result records ``fitted_on`` and, per factor,
its rows; ``rlsim.planner.validate.gpu_published`` then reports the error on every row.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from rlsim.planner.profile.gpu_efficiency import ASSUMED, Efficiency, save_efficiency
from rlsim.planner.sim.gpu_step import predict_step, refit_s, response_lengths, trainer_phases
from rlsim.planner.validate.published_runs import CALIBRATION, PublishedRun

BLOG = [r for r in CALIBRATION if r.phases]
# No kernel streams HBM above about 90% of its datasheet rate; the fit may not go beyond it.
MAX_DECODE_BW = 0.9
_START = {"decode_bw": 0.7, "decode_fixed_s": 0.002, "refit_fixed_s": 2.0, "step_overhead_s": 3.0}


def _efficiency(values: dict[str, object], provenance: dict[str, str], fitted_on: list[str]) -> Efficiency:
    return Efficiency.model_validate({**values, "provenance": provenance, "fitted_on": fitted_on})


def _lengths(row: PublishedRun) -> np.ndarray:
    rng = np.random.default_rng(row.config.seed)
    return response_lengths(row.config, rng) + row.config.rollouts.prompt_tokens


def _solve_mfu(row: PublishedRun, eff: Efficiency, what: str) -> float:
    """The MFU that makes the row's modelled phase equal its published one (phase = A / mfu + B)."""
    backend = row.config.training.backend
    keys = ("logprobs_old", "logprobs_ref") if what == "logprobs" else ("training",)
    table = "logprob_mfu" if what == "logprobs" else "train_mfu"

    def phase(mfu: float) -> float:
        trial = eff.model_copy(update={table: {**getattr(eff, table), backend: mfu}})
        p = trainer_phases(row.config, trial, _lengths(row))
        return sum(p[k] for k in keys)

    at1, at_half = phase(1.0), phase(0.5)
    a = at_half - at1
    b = at1 - a
    return a / (row.phases[what] - b)


def fit(steps: int = 3) -> Efficiency:
    """The calibrated factors (deterministic: every row's lengths come from its own seed)."""
    values: dict[str, object] = {k: v for k, (v, _) in ASSUMED.items()}
    values |= _START
    values |= {"train_mfu": {"megatron": 0.5, "dtensor": 0.5}, "logprob_mfu": {"megatron": 0.5, "dtensor": 0.5}}
    prov = {k: why for k, (_, why) in ASSUMED.items()} | dict.fromkeys(_START, "start value")
    prov |= {"train_mfu": "start value", "logprob_mfu": "start value"}
    eff = _efficiency(values, prov, [])
    for what, table in (("training", "train_mfu"), ("logprobs", "logprob_mfu")):
        fitted = {r.config.training.backend: round(_solve_mfu(r, eff, what), 4) for r in BLOG}
        values[table] = fitted
        prov[table] = "fitted: " + ", ".join(f"{r.config.training.backend} on {r.id} ({what} phase)" for r in BLOG)
    eff = _efficiency(values, prov, [])
    zero = eff.model_copy(update={"refit_fixed_s": 0.0})
    values["refit_fixed_s"] = round(float(np.mean([r.phases["refit"] - refit_s(r.config, zero) for r in BLOG])), 3)
    values["step_overhead_s"] = round(float(np.mean([r.step_s - sum(r.phases.values()) for r in BLOG])), 3)
    prov["refit_fixed_s"] = "fitted: mean refit phase less transfer on " + ", ".join(r.id for r in BLOG)
    prov["step_overhead_s"] = "fitted: mean step less its four phases on " + ", ".join(r.id for r in BLOG)
    base = _efficiency(values, prov, [])

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = base.model_copy(update={"decode_bw": float(x[0]), "decode_fixed_s": float(x[1])})
        out = []
        for r in CALIBRATION:
            pred = predict_step(r.config, trial, steps)
            out.append(
                pred.phases["generation"] / r.phases["generation"] - 1 if r.phases else pred.step_s / r.step_s - 1
            )
        return np.array(out)

    sol = least_squares(residuals, x0=[0.7, 0.002], bounds=([0.2, 0.0], [MAX_DECODE_BW, 0.05]), diff_step=1e-3)
    values["decode_bw"], values["decode_fixed_s"] = round(float(sol.x[0]), 4), round(float(sol.x[1]), 6)
    rows = ", ".join(f"{r.id} ({'generation phase' if r.phases else 'step'})" for r in CALIBRATION)
    prov["decode_bw"] = prov["decode_fixed_s"] = f"fitted (least squares, relative): {rows}"
    return _efficiency(values, prov, [r.id for r in CALIBRATION])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m rlsim.planner.profile.fitting.gpu OUT.json", file=sys.stderr)
        return 2
    eff = fit()
    save_efficiency(eff, Path(argv[0]))
    print(eff.model_dump_json(indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
