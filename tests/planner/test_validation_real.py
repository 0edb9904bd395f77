"""``rlsim plan validate`` end to end on the real loop: one tiny configuration on Ray.

Hugging Face generation stands in for vLLM here (no ~35 s engine start), so the run stays near a
minute on 2 cores; the prediction comes from a hand-made profile, so only the plumbing is checked
(the real validation set, with vLLM and the measured profile, is benchmarks/results/plan_validate_cpu.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlsim.cli.main import main
from rlsim.planner.profile.schema import save_profile
from tests.planner.test_validation import ROOT, loop_profile

pytestmark = pytest.mark.slow


def test_validate_one_tiny_config_on_the_real_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_profile(loop_profile(), tmp_path / "profile.json")
    doc = {
        "base": str(ROOT / "configs" / "default.yaml"),
        "profile": "profile.json",
        "steps": 2,
        "warmup_steps": 1,
        "run": {
            "policy": {"backend": "hf"},
            "reward": {"runtime": "eager", "batch_size": 4},
            "workload": {
                "prompts_per_step": 1,
                "group_size": 2,
                "spec": {"prompt": {"kind": "fixed", "tokens": 8}, "response": {"kind": "fixed", "tokens": 8}},
            },
        },
        "configs": [
            {"name": "tiny", "run": {"schedule": "sequential"}},
            # the same actors, warm: its warm-up step is not run (loop_runner), step 2 is still the one measured
            {"name": "tiny-warm", "run": {"schedule": "sequential", "workload": {"group_size": 3}}},
        ],
    }
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump(doc))
    json_path = tmp_path / "validate.json"
    assert main(["plan", "validate", str(path), "--out", str(tmp_path / "runs"), "--json", str(json_path)]) == 0
    report = json.loads(json_path.read_text())
    entry, warm = report["configs"]
    results = json.loads((tmp_path / "runs" / "tiny" / "results.json").read_text())
    warm_results = json.loads((tmp_path / "runs" / "tiny-warm" / "results.json").read_text())
    assert results["warmup_steps"] == 1 and [s["step"] for s in results["steps"]] == [1, 2]
    assert warm_results["warmup_steps"] == 0 and [s["step"] for s in warm_results["steps"]] == [2]
    assert warm["steps"] == [2] and warm["measured_step_s"] == pytest.approx(
        warm_results["steps"][0]["time_s"]["total"]
    )
    step2 = results["steps"][1]
    # The measured figure is the loop's own step 2 (step 1 is warm-up), and the error follows from it.
    assert entry["steps"] == [2] and entry["measured_step_s"] == pytest.approx(step2["time_s"]["total"])
    assert entry["error"] == pytest.approx(entry["predicted_step_s"] / entry["measured_step_s"] - 1)
    errors = sorted(abs(e["error"]) for e in (entry, warm))
    assert report["median_abs_error"] == pytest.approx(sum(errors) / 2)
    assert step2["tokens"]["generated"] == 16 and entry["rollouts_per_step"] == 2
    assert report["sessions"][0]["configs"] == ["tiny", "tiny-warm"]
    assert "median |error|" in capsys.readouterr().out
