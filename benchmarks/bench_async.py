"""Rollouts trained per hour: ``async`` (max_staleness 1) against ``overlapped``, on ``shared`` and ``split`` placement.

    python benchmarks/bench_async.py                         # 4 steps per run, one fresh run per condition
    python benchmarks/bench_async.py --repeats 3 --steps 6   # repeated fresh runs: means with 95% CIs

Each condition is a fresh ``rlsim run`` process (Ray, vLLM and the actors started anew; start-up is not
counted). Conditions run interleaved per repeat (overlapped/shared, async/shared, overlapped/split,
async/split), so drifting machine load hits them alike, and the async/overlapped ratio is taken within
each repeat (paired). Throughput = rollouts trained / wall time from the first step's start to the last
step's end: for overlapped the sum of step times, for async its ``async.wall_s`` (the pipeline fill
included). Writes benchmarks/results/bench_async.json; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402
from rlsim.metrics.stats import mean_ci  # noqa: E402
from rlsim.run_results import RunResults  # noqa: E402

CONDITIONS = [("overlapped", "shared"), ("async", "shared"), ("overlapped", "split"), ("async", "split")]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--runs", default=str(ROOT / "runs" / "bench_async"))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    return p.parse_args()


def run_one(schedule: str, placement: str, repeat: int, args: argparse.Namespace) -> dict:
    out = Path(args.runs) / f"{schedule}-{placement}-{repeat}"
    config = ROOT / "configs" / f"{schedule}.yaml"
    sets = [f"steps={args.steps}", f"placement.preset={placement}", *args.overrides]
    if schedule == "async":  # no per-update trainer checkpoint: the overlapped runs save none either
        sets += [f"async.max_staleness={args.max_staleness}", "async.checkpoint=false"]
    cmd = [sys.executable, "-m", "rlsim", "run", str(config), "--out", str(out), "--no-progress"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, cwd=ROOT)
    res = RunResults.read(out / "results.json")
    trained = sum(s.rollouts.trained or 0 for s in res.steps)
    row = {
        "schedule": schedule,
        "placement": placement,
        "repeat": repeat,
        "out": str(out),
        "trained": trained,
        "step_s": [round(s.time_s.total, 3) for s in res.steps],
    }
    if res.async_ is not None and res.rollouts_total is not None:
        wall = float(res.async_.wall_s or 0.0)
        row.update(
            trainer_idle_fraction=res.async_.trainer_idle_fraction,
            rollout_idle_fraction=res.async_.rollout_idle_fraction,
            staleness_histogram=res.async_.staleness_histogram,
            rollouts_total=res.rollouts_total.model_dump(),
            weight_sync_pause_s=res.async_.weight_sync_pause_s,
        )
    else:
        wall = sum(s.time_s.total for s in res.steps)
    row.update(wall_s=round(wall, 3), rollouts_trained_per_hour=round(trained / wall * 3600, 1))
    return row


def summarise(rows: list[dict]) -> dict:
    out: dict = {}
    for placement in ("shared", "split"):
        mine = [r for r in rows if r["placement"] == placement]
        per = {s: [r["rollouts_trained_per_hour"] for r in mine if r["schedule"] == s] for s in ("overlapped", "async")}
        ratios = [a / o for a, o in zip(per["async"], per["overlapped"], strict=True)]
        entry = {"ratio_async_over_overlapped": [round(x, 3) for x in ratios], "per_hour": per}
        if len(ratios) >= 2:
            est = mean_ci(ratios)
            entry["ratio_mean_ci95"] = [round(est.mean, 3), round(est.low, 3), round(est.high, 3)]
        out[placement] = entry
    return out


def main() -> None:
    args = parse_args()
    rows = []
    for repeat in range(args.repeats):
        for schedule, placement in CONDITIONS:
            rows.append(run_one(schedule, placement, repeat, args))
            print(json.dumps(rows[-1]), file=sys.stderr)
    summary = {
        "benchmark": "bench_async",
        "steps": args.steps,
        "repeats": args.repeats,
        "max_staleness": args.max_staleness,
        "overrides": args.overrides,
        "summary": summarise(rows),
        "runs": rows,
        "machine": machine_fingerprint(),
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    atomic_write_json(Path(args.out) / "bench_async.json", summary)
    print(json.dumps({"benchmark": "bench_async", **summary["summary"]}))


if __name__ == "__main__":
    main()
