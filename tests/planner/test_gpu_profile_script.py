"""benchmarks/gpu_profile.sh --dry-run checks every step's config on a machine without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_profile.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def test_dry_run_validates_the_profile_and_every_loop_config(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    done = run("--dry-run", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "gpu_profile": "dry-run",
        "config": "configs/profiles/measure_gpu_1x.yaml",
        "out": str(out),
        "ok": True,
    }
    assert "4 configs x 3 steps" in done.stdout and "policy on cuda" in done.stdout
    assert "would run: timeout 600" in done.stderr and not out.exists()


def test_dry_run_refuses_a_bad_override() -> None:
    done = run("--dry-run", "--set", "batch_sizes=[1]")
    assert done.returncode == 2
    assert "batch_sizes" in done.stderr
