"""Refit a profile's contention entry on a chosen subset of its overlapped calibration runs and predict a validated
configuration with each fit: what one more calibration config changes (issue 31 item 4).

    python benchmarks/contention_refit.py --profile P.json --runs RUNS/profile --validation V.json \\
        --fit cal-ovl-32 --fit cal-ovl-32,cal-ovl-40-long-mb4 --json benchmarks/results/contention_refit.json

``--runs``: the profile's loop runs (``rlsim profile ... --runs FOLDER``), one folder per config; ``--validation``:
a ``rlsim plan validate`` JSON whose configurations are predicted again from their own loop runs. Prints one line
per fit and writes the figures as JSON (atomically) with the machine's fingerprint.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rlsim.errors import RlsimError
from rlsim.fingerprint import machine_fingerprint
from rlsim.io import atomic_write_json
from rlsim.loop.config import RunConfig
from rlsim.planner.profile.fitting.loops import fit_contention, read_calibration_run
from rlsim.planner.profile.schema import load_profile
from rlsim.planner.validate.predict import predict_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True, type=Path)
    parser.add_argument("--runs", required=True, type=Path, help="the profile's loop-run folder")
    parser.add_argument("--validation", required=True, type=Path, help="a `rlsim plan validate` JSON")
    parser.add_argument("--fit", action="append", required=True, help="comma-separated overlapped configs to fit on")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        refit(args, parser)
    except (RlsimError, OSError, ValueError, KeyError, TypeError) as err:  # a missing, cut or foreign file
        parser.error(f"{type(err).__name__}: {err}")


def refit(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    profile = load_profile(args.profile)
    runs = {
        p.parent.name: read_calibration_run(p, disturbed_above=0.15) for p in sorted(args.runs.glob("*/results.json"))
    }
    validation = json.loads(args.validation.read_text())
    cases, warmup = validation["configs"], int(validation.get("warmup_steps", 1))
    out = []
    for names in (f.split(",") for f in args.fit):
        missing = [n for n in names if n not in runs]
        if missing:
            parser.error(f"no loop run for {', '.join(missing)} in {args.runs} (it has {', '.join(runs)})")
        fitted = fit_contention([r for n, r in runs.items() if not r.contended or n in names], profile)
        if fitted is None:
            parser.error(f"{', '.join(names)}: none of them is an overlapped shared run; nothing to fit")
        trial = profile.model_copy(update={"contention": fitted})
        entry = fitted.per_runtime[next(iter(sorted(fitted.per_runtime)))]
        row = {
            "fit_on": names,
            "gen_slowdown": entry.gen_slowdown,
            "score_slowdown": entry.score_slowdown,
            "configs": [],
        }
        for case in cases:
            config = RunConfig.model_validate(
                json.loads((Path(case["run_dir"]) / "results.json").read_text())["config"]
            )
            steps = predict_step(config, trial, replay=list(range(warmup + 1, config.steps + 1))).steps
            predicted = {k: float(np.median([s.time_s[k] for s in steps])) for k in ("total", "generate", "score")}
            measured = {
                "total": case["measured_step_s"],
                **{k: case["phases_s"][k]["measured"] for k in ("generate", "score")},
            }
            row["configs"].append({"name": case["name"], "predicted_s": predicted, "measured_s": measured,
                                   "error": predicted["total"] / measured["total"] - 1.0})  # fmt: skip
            print(f"fit on {'+'.join(names)}: gen +{entry.gen_slowdown:.0%} score +{entry.score_slowdown:.0%}; "
                  f"{case['name']} predicted {predicted['total']:.2f} s, measured {measured['total']:.2f} s "
                  f"({row['configs'][-1]['error']:+.1%})")  # fmt: skip
        out.append(row)
    if args.json:
        doc = {
            "profile": str(args.profile),
            "validation": str(args.validation),
            "machine": machine_fingerprint(),
            "fits": out,
        }
        atomic_write_json(args.json, doc)


if __name__ == "__main__":
    main()
