"""The GPU model's efficiency factors refilled from a user's own run log (verl or OpenRLHF JSONL).

``rlsim profile --from-log LOG --gpu-run RUN.yaml --out EFF.json``: the run YAML says what ran (model, GPUs,
parallelism); the log says how long each phase took (``profile.logs.frameworks``' mapping: generation, scoring,
update = the trainer's log-prob passes plus the actor update, sync, step). Starting from the run's own
efficiency JSON, these factors are replaced, each solved exactly on the log's mean step, and their
provenance says ``log: FILE``:

- ``decode_fixed_s``: the generation phase (less the modelled verifier) is linear in it;
- ``train_mfu`` and ``logprob_mfu`` of the run's backend, scaled together: the update phase is
  ``A / k + B`` in a common factor ``k`` on both;
- ``refit_fixed_s``: the sync phase less the modelled transfer;
- ``step_overhead_s``: the step less every logged phase.

The log's mean prompt and response lengths replace the YAML's, so the refilled factors describe the
user's cluster, not the lengths' spread. Everything else stays as the base JSON had it.
"""

from __future__ import annotations

import numpy as np

from rlsim.errors import RlsimError
from rlsim.planner.profile.gpu_efficiency import Efficiency
from rlsim.planner.profile.logs.frameworks import LoggedStep
from rlsim.planner.sim.gpu_step import predict_step, refit_s
from rlsim.planner.spec.gpu_run import GpuRunConfig


def _run_like_log(cfg: GpuRunConfig, steps: list[LoggedStep]) -> GpuRunConfig:
    prompt = max(1, round(float(np.mean([s.prompt_mean for s in steps]))))
    response = float(np.mean([s.response_mean for s in steps]))
    rollouts = cfg.rollouts.model_copy(update={"prompt_tokens": prompt, "response_mean": response})
    try:
        return GpuRunConfig.model_validate({**cfg.model_dump(), "rollouts": rollouts.model_dump()})
    except ValueError as err:
        raise RlsimError(f"the log's mean lengths do not fit the run YAML: {err}") from None


def fit_from_log(cfg: GpuRunConfig, base: Efficiency, steps: list[LoggedStep], source: str) -> Efficiency:
    """``base`` with the five factors above solved on the mean of ``steps`` (seconds per phase)."""
    if not steps:
        raise RlsimError(f"{source}: no steps to fit")
    run = _run_like_log(cfg, steps)
    mean = {k: float(np.mean([getattr(s, k) for s in steps])) for k in ("gen_s", "update_s", "sync_s", "step_s")}
    mean["score_s"] = float(np.mean([s.score_s for s in steps]))
    backend = run.training.backend

    def phases(eff: Efficiency) -> dict[str, float]:
        return predict_step(run, eff, steps=2).phases

    # generation (the model's phase holds the verifier, as verl's gen + reward): linear in the fixed cost
    target_gen = mean["gen_s"] + mean["score_s"]
    at0 = phases(base.model_copy(update={"decode_fixed_s": 0.0}))["generation"]
    at1 = phases(base.model_copy(update={"decode_fixed_s": 1e-3}))["generation"]
    fixed = max(0.0, (target_gen - at0) / ((at1 - at0) / 1e-3))
    # trainer: log-prob passes and update share one factor k on their MFUs
    trainer_keys = ("logprobs_old", "logprobs_ref", "values", "training", "update_critic")

    def trainer(k: float) -> float:
        scaled = base.model_copy(
            update={
                "train_mfu": {**base.train_mfu, backend: base.mfu(base.train_mfu, backend, "train_mfu") * k},
                "logprob_mfu": {**base.logprob_mfu, backend: base.mfu(base.logprob_mfu, backend, "logprob_mfu") * k},
            }
        )
        p = phases(scaled)
        return sum(p[key] for key in trainer_keys)

    t1, t_half = trainer(1.0), trainer(0.5)
    a = t_half - t1
    b = t1 - a
    if mean["update_s"] <= b:
        raise RlsimError(
            f"{source}: the logged update ({mean['update_s']:.1f} s) is below the model's communication floor"
        )
    k = a / (mean["update_s"] - b)
    refit = max(0.0, mean["sync_s"] - refit_s(run, base.model_copy(update={"refit_fixed_s": 0.0})))
    logged = mean["gen_s"] + mean["score_s"] + mean["update_s"] + mean["sync_s"]
    overhead = max(0.0, mean["step_s"] - logged)
    why = f"log: {source} ({len(steps)} steps)"
    prov = dict(base.provenance)
    for key in ("decode_fixed_s", "train_mfu", "logprob_mfu", "refit_fixed_s", "step_overhead_s"):
        prov[key] = why
    refilled = base.model_copy(
        update={
            "decode_fixed_s": round(fixed, 6),
            "train_mfu": {**base.train_mfu, backend: round(min(1.0, base.train_mfu[backend] * k), 4)},
            "logprob_mfu": {**base.logprob_mfu, backend: round(min(1.0, base.logprob_mfu[backend] * k), 4)},
            "refit_fixed_s": round(refit, 3),
            "step_overhead_s": round(overhead, 3),
            "provenance": prov,
            "fitted_on": [why],
        }
    )
    return Efficiency.model_validate(refilled.model_dump())
