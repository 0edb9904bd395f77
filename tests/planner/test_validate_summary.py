"""Several validation reports merged into the whole set's errors (benchmarks/plan_validate_summary.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.planner.validate.compare import merged_report, validation_report

ROOT = Path(__file__).resolve().parents[2]


def report(errors: list[tuple[str, float]], name: str) -> dict:
    entries = [{"name": f"{name}-{i}", "error": e, "algorithm": a} for i, (a, e) in enumerate(errors)]
    return validation_report(entries, validation_set=name, complete=True)


def test_the_whole_set_is_every_configuration_of_every_report(tmp_path: Path) -> None:
    grpo = report([("grpo", 0.02), ("grpo", -0.04), ("grpo", 0.30)], "grpo.yaml")
    ppo = report([("ppo", 0.08), ("ppo", -0.12)], "ppo.yaml")
    merged = merged_report([("a.json", grpo), ("b.json", ppo)])
    # |errors| 0.02 0.04 0.08 0.12 0.30: the median is the third.
    assert merged["median_abs_error"] == pytest.approx(0.08)
    assert merged["by_algorithm"]["ppo"]["median_abs_error"] == pytest.approx(0.10)
    assert merged["by_algorithm"]["grpo"]["max_abs_error"] == pytest.approx(0.30)
    assert [e["validation_set"] for e in merged["configs"]].count("ppo.yaml") == 2
    paths = []
    for name, r in (("a.json", grpo), ("b.json", ppo)):
        (tmp_path / name).write_text(json.dumps(r))
        paths.append(str(tmp_path / name))
    script = ROOT / "benchmarks" / "plan_validate_summary.py"
    out = subprocess.run(
        [sys.executable, str(script), *paths, "--out", str(tmp_path / "m.json")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])["median_abs_error"] == pytest.approx(0.08)
    assert json.loads((tmp_path / "m.json").read_text())["merged_from"] == paths


def test_an_interrupted_report_is_refused() -> None:
    partial = {**report([("ppo", 0.1)], "ppo.yaml"), "complete": False}
    with pytest.raises(RlsimError, match="b.json is not a complete"):
        merged_report([("b.json", partial)])
