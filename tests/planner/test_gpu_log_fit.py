"""The GPU model's efficiency factors refilled from a framework log reproduce that log's phases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from rlsim.cli.main import main
from rlsim.planner.profile.gpu_efficiency import load_efficiency
from rlsim.planner.profile.logs.frameworks import read_framework_log
from rlsim.planner.sim.gpu_step import predict_step
from rlsim.planner.spec.gpu_run import GpuRunConfig

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "planner" / "data" / "verl_metrics.jsonl"
RUN = {
    "kind": "gpu-step", "model": "llama-3.1-8b", "gpu": "h100-sxm", "gpus": 8, "training": {"backend": "dtensor"},
    "rollouts": {"prompts_per_step": 64, "group_size": 8, "prompt_tokens": 190, "response_mean": 560,
                 "max_sequence": 2048},
    "efficiency": str(ROOT / "configs" / "profiles" / "gpu_efficiency_nemo_rl.json"), "steps": 2,
}  # fmt: skip


def test_refilled_factors_reproduce_the_logged_phases(tmp_path: Path) -> None:
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text(yaml.safe_dump(RUN))
    out = tmp_path / "eff.json"
    assert main(["profile", "--from-log", str(LOG), "--gpu-run", str(run_yaml), "--out", str(out)]) == 0
    eff = load_efficiency(out)
    assert eff.provenance["train_mfu"].startswith("log: verl log") and eff.fitted_on[0].startswith("log:")
    _, steps = read_framework_log(LOG)
    logged = {
        k: float(np.mean([getattr(s, k) for s in steps])) for k in ("gen_s", "score_s", "update_s", "sync_s", "step_s")
    }
    prompt = round(float(np.mean([s.prompt_mean for s in steps])))
    response = float(np.mean([s.response_mean for s in steps]))
    cfg = GpuRunConfig.model_validate(
        {**RUN, "rollouts": {**RUN["rollouts"], "prompt_tokens": prompt, "response_mean": response}}
    )
    p = predict_step(cfg, eff, steps=2).phases
    trainer = p["logprobs_old"] + p["logprobs_ref"] + p["training"]
    assert p["generation"] == pytest.approx(logged["gen_s"] + logged["score_s"], rel=0.02)
    assert trainer == pytest.approx(logged["update_s"], rel=0.02)
    assert p["refit"] == pytest.approx(logged["sync_s"], rel=0.02)
    assert sum(p.values()) == pytest.approx(logged["step_s"], rel=0.03)
