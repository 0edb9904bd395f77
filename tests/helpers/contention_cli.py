"""Run ``rlsim experiment contention`` as a subprocess, as a user would, for the slow end-to-end tests.

A subprocess, so a Ray cluster other tests keep in this process cannot be reused by it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
# The smallest work that still has two groups per step and several micro-batches per condition.
TINY = [
    "loop.micro_batch=2",
    "loop.workload.prompts_per_step=2",
    "loop.workload.group_size=2",
    "loop.workload.spec={seed: 0, prompt: {kind: fixed, tokens: 16}, response: {kind: fixed, tokens: 8}}",
    "contention.session_per_repeat=false",  # one Ray session (one engine start) for both repeats
    "contention.settle_max_s=1",
]


def run_cli(config: Path, out: Path, *args: str, overrides: list[str] = TINY) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(results.json, the last stdout line's JSON)``; fails with the end of stderr if the CLI fails."""
    sets = [x for o in overrides for x in ("--set", o)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "rlsim", "experiment", "contention", str(config), "--out", str(out), "--no-progress"]
    proc = subprocess.run([*cmd, *args, *sets], capture_output=True, text=True, timeout=1200, env=env, cwd=out.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return json.loads((out / "results.json").read_text()), summary
