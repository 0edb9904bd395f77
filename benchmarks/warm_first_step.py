"""Is the first step of a loop run on warm actors a warm-up? Step 1 against the run's later steps, both relative to
the planner, for runs on just-started actors and runs on the previous run's warm actors.

    python benchmarks/warm_first_step.py --profile R/profile.json R/prof R/validate_cpu ... \\
        --json benchmarks/results/warm_first_step.json

Each folder holds loop runs (``rlsim profile --runs`` or ``rlsim plan validate --out``: one folder per run, with
``anchor-runs/NN`` for the anchor), made in the order their results.json were last written. A run is **fresh**
when it is the first of its folder or its actors differ from the previous run's (``loop_runner.actor_key``: the
runner started new ones), else **warm**. Per run: ``r_k = measured / predicted`` step time for each step (the
profile predicts every step's own lengths), and ``step1 = r_1 / mean(r_2..)``; a step 1 that is a warm-up shows
``step1 > 1``. Async runs are left out (their first step fills the pipeline), and so are runs without a step 1:
since 2026-12-08 the runner runs no warm-up step on warm actors, so only runs made before (or on fresh actors)
can answer; a folder filled with ``--reuse`` mixes hours and its file times no longer give the order the runs
shared actors in. Writes the runs and the medians (atomically) with the machine's fingerprint. This is what
``rlsim.planner.measure.loop_runner`` rests on when it runs no warm-up step on warm actors.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.fingerprint import machine_fingerprint
from rlsim.io import atomic_write_json
from rlsim.loop.config import RunConfig
from rlsim.planner.measure.loop_results import parse_loop_steps, read_json
from rlsim.planner.measure.loop_runner import actor_key
from rlsim.planner.profile.schema import load_profile
from rlsim.planner.validate.predict import loop_trace, predict_trace
from rlsim.schedule_kinds import schedule_kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True, type=Path, help="the profile that predicts every step")
    parser.add_argument("folders", nargs="+", type=Path, help="folders of loop runs (one sub-folder per run)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        result = measure(args.profile, args.folders)
    except (RlsimError, OSError, ValueError, KeyError, TypeError) as err:  # a missing, cut or foreign file
        parser.error(f"{type(err).__name__}: {err}")
    for kind in ("fresh", "warm"):
        s = result["summary"][kind]
        print(f"{kind:5s} runs: {s['runs']:3d}  step 1 / later steps, median {s['median']}, range {s['range']}")
    if args.json:
        atomic_write_json(args.json, result)
        print(f"wrote {args.json}")


def measure(profile_path: Path, folders: list[Path]) -> dict[str, Any]:
    profile = load_profile(profile_path)
    runs: list[dict[str, Any]] = []
    for folder in folders:
        paths = sorted(folder.glob("*/results.json")) + sorted(folder.glob("*/*/results.json"))
        if not paths:
            raise RlsimError(f"{folder} holds no <run>/results.json")
        previous = None
        for path in sorted(paths, key=lambda p: p.stat().st_mtime):
            data = read_json(path)
            config = RunConfig.model_validate(data["config"])
            key = actor_key(config)
            fresh, previous = key != previous, key
            if schedule_kind(config.schedule).pipelined:
                continue
            steps = parse_loop_steps({**data, "warmup_steps": None}, path, skip_first=0)  # every step it ran
            if len(steps.numbers) < 2 or steps.numbers[0] != 1:
                continue  # no step 1 (a run that skipped its warm-up) or nothing to hold it against
            predicted = predict_trace(config, profile, loop_trace(config, steps.numbers)).steps
            ratios = [float(m) / p.time_s["total"] for m, p in zip(steps.time_s["total"], predicted, strict=True)]
            later = statistics.fmean(ratios[1:])
            runs.append(
                {
                    "run": str(path.parent),
                    "fresh": fresh,
                    "ratios": [round(r, 4) for r in ratios],
                    "step1": round(ratios[0] / later, 4),
                }
            )
    summary = {}
    for kind, fresh in (("fresh", True), ("warm", False)):
        values = [r["step1"] for r in runs if r["fresh"] == fresh]
        summary[kind] = {
            "runs": len(values),
            "median": round(statistics.median(values), 3) if values else None,
            "range": [min(values), max(values)] if values else None,
        }
    return {
        "benchmark": "warm_first_step",
        "profile": str(profile_path),
        "folders": [str(f) for f in folders],
        "definition": "step1 = (measured/predicted of step 1) / mean over the run's later steps of the same",
        "machine": machine_fingerprint(),
        "summary": summary,
        "runs": runs,
    }


if __name__ == "__main__":
    main()
