"""benchmarks/loop_repeatability.py: identical runs compared phase by phase, different work refused,
steps other programs disturbed left out of both runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def write_run(folder: Path, totals: list[float], tokens: list[int], foreign: list[float] | None = None) -> None:
    steps = [
        {
            "step": i,
            "time_s": {"generate": t / 2, "score": t / 4, "update": t / 4, "sync": 0.0, "idle": 0.0, "total": t},
            "rollouts": {"generated": 4, "scored": 4, "trained": 4},
            "tokens": {"generated": n},
        }
        for i, (t, n) in enumerate(zip(totals, tokens, strict=True), start=1)
    ]
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"config": {}, "complete": True, "steps": steps}))
    if foreign is not None:
        load = [{"step": i, "foreign_cpu_share": x} for i, x in enumerate(foreign, start=1)]
        (folder / "machine_load.json").write_text(json.dumps({"steps": load}))


def test_same_work_is_compared_and_different_work_skipped(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a / "same", [9.0, 10.0, 12.0], [100, 200, 300])
    write_run(b / "same", [5.0, 8.0, 12.0], [100, 200, 300])  # step 1 (warm-up) left out: 22 / 20 - 1
    write_run(a / "other", [1.0, 1.0, 1.0], [100, 200, 300])
    write_run(b / "other", [1.0, 1.0, 1.0], [100, 250, 300])
    write_run(a / "noisy", [1.0, 2.0, 9.0], [1, 2, 3])
    write_run(b / "noisy", [1.0, 1.0, 3.0], [1, 2, 3], foreign=[0.0, 0.0, 0.4])  # step 3 disturbed in b
    script = ROOT / "benchmarks" / "loop_repeatability.py"
    done = subprocess.run(
        [sys.executable, str(script), str(a), str(b), "--name", "t", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads((tmp_path / "loop_repeatability_t.json").read_text())
    assert result["pairs"]["same"]["total"] == pytest.approx(0.1)
    assert result["pairs"]["noisy"]["total"] == pytest.approx(1.0)  # step 2 only: 2 / 1 - 1
    assert result["disturbed_steps_left_out"] == {"noisy": [3]}
    assert "generated tokens differ" in result["skipped"]["other"]
    assert json.loads(done.stdout.splitlines()[-1])["pairs"] == 2
