"""``rlsim run`` end to end through the CLI: a real config file, overrides, outputs, exit status.

Uses the Hugging Face generation backend so it needs no second vLLM engine start; the vLLM path is
covered by test_loop_ray.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_rlsim_run_writes_results_and_prints_a_summary(ray_cluster, tmp_path: Path, capsys) -> None:
    from rlsim.cli.main import main

    out = tmp_path / "run"
    rc = main(
        [
            "run",
            str(CONFIGS / "sequential.yaml"),
            "--out",
            str(out),
            "--no-progress",
            "--set",
            "steps=1",
            "--set",
            "policy.backend=hf",
            "--set",
            "workload.prompts_per_step=2",
            "--set",
            "workload.group_size=2",
            "--set",
            "workload.spec.response={kind: fixed, tokens: 6}",
            "--set",
            "placement.rollout.num_cpus=0.25",
            "--set",
            "placement.scorer.num_cpus=0.25",
            "--set",
            "placement.trainer.num_cpus=0.25",
        ]
    )
    assert rc == 0
    captured = capsys.readouterr()
    last = json.loads(captured.out.strip().splitlines()[-1])  # the last stdout line is one JSON object
    assert last["steps"] == 1 and last["out"] == str(out)
    assert "4 rollouts generated = scored = trained" in captured.err
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["steps"][0]["sync"]["method"] == "hf-load"
    assert results["steps"][0]["tokens"]["generated"] == 4 * 6
    assert {"report.md", "timeline.json", "gantt.png", "breakdown.png"} <= {p.name for p in out.iterdir()}
