"""Run ``rlsim experiment contention`` in this process, through the CLI's own entry point, for the PPO and async
end-to-end tests.

In this process, on the suite's shared two-node Ray cluster (the caller asks for the ``ray_cluster`` fixture):
their subject is the experiment's measurements, not process death, so they need neither an interpreter nor a
Ray start of their own (about 10 s each on 2 cores). The experiment finds Ray connected and leaves it running.
The GRPO end-to-end test (test_contention_e2e.py) still runs the CLI as a subprocess: it checks that each
repeat's fresh Ray session leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from rlsim.cli.main import main

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
    """``(results.json, the last stdout line's JSON)``; fails if the command does not exit 0."""
    sets = [x for o in overrides for x in ("--set", o)]
    argv = ["experiment", "contention", str(config), "--out", str(out), "--no-progress", *args, *sets]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(argv)
    assert code == 0, f"rlsim {' '.join(argv)} exited {code}"
    summary = json.loads(stdout.getvalue().strip().splitlines()[-1])
    return json.loads((out / "results.json").read_text()), summary
