"""Rollouts trained per hour: ``async`` (max_staleness 1) against ``overlapped``, on ``shared`` and ``split`` placement.

    python benchmarks/bench_async.py                         # 4 steps per run, one fresh run per condition
    python benchmarks/bench_async.py --repeats 3 --steps 6   # repeated fresh runs: means with 95% CIs
    python benchmarks/bench_async.py --placements split-gen-score --repeats 3 --name gen_score
    python benchmarks/bench_async.py --schedules async,async-partial --placements shared --name partial

Schedules (``--schedules``): ``overlapped``, ``async`` and ``async-partial`` (``async`` with
``async.partial_rollouts: true``: weights load between engine steps of the generate call under way).

Placements: ``shared`` (every actor on every core), ``split`` (the rollout actor on the first half of the
cores, the scorer and the trainer on the rest) and ``split-gen-score`` (``split`` with the scorer moved
beside the rollout actor, ``placement.scorer.cores``: the trainer has the other half to itself, which is
where async can hide generation and scoring under the update).

Each condition is a fresh ``rlsim run`` process (Ray, vLLM and the actors started anew; start-up is not
counted). Conditions run interleaved per repeat (overlapped then async, placement by placement), so
drifting machine load hits them alike, and the async/overlapped ratio is taken within each repeat
(paired). Throughput = rollouts trained / wall time from the first step's start to the last step's end:
for overlapped the sum of step times, for async its ``async.wall_s`` (the pipeline fill included).
Writes benchmarks/results/bench_async.json (``--name``: bench_async_NAME.json) after every run, with
``complete`` false until the last; the last stdout line is one JSON object.
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

PLACEMENTS = ("shared", "split", "split-gen-score")
SCHEDULES = ("overlapped", "async", "async-partial")


def placement_sets(placement: str) -> list[str]:
    """The ``--set`` overrides of a placement name (see the module docstring)."""
    if placement != "split-gen-score":
        return [f"placement.preset={placement}"]
    import os

    from rlsim.placement import split_pool

    rollout, _ = split_pool(sorted(os.sched_getaffinity(0)))
    return ["placement.preset=split", f"placement.scorer.cores=[{','.join(map(str, rollout))}]"]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument(
        "--placements",
        default="shared,split",
        help=f"comma-separated, of {', '.join(PLACEMENTS)} (default: shared,split)",
    )
    p.add_argument(
        "--schedules",
        default="overlapped,async",
        help=f"comma-separated, of {', '.join(SCHEDULES)} (default: overlapped,async)",
    )
    p.add_argument("--name", default="", help="write bench_async_NAME.json (default: bench_async.json)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--runs", default=str(ROOT / "runs" / "bench_async"))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args()
    args.placements = [x.strip() for x in args.placements.split(",") if x.strip()]
    args.schedules = [x.strip() for x in args.schedules.split(",") if x.strip()]
    for flag, given, known in [
        ("--placements", args.placements, PLACEMENTS),
        ("--schedules", args.schedules, SCHEDULES),
    ]:
        unknown = sorted(set(given) - set(known))
        if unknown or len(given) < (2 if flag == "--schedules" else 1):
            what = f"unknown {unknown}" if unknown else ("fewer than two to compare" if given else "none given")
            p.error(f"{flag}: {what}; choose from {', '.join(known)}")
    if args.repeats < 1 or args.steps < 2:
        p.error("--repeats must be >= 1 and --steps >= 2 (the first step fills the pipeline)")
    return args


def run_one(schedule: str, placement: str, repeat: int, args: argparse.Namespace) -> dict:
    out = Path(args.runs) / f"{schedule}-{placement}-{repeat}"
    config = ROOT / "configs" / f"{schedule.removesuffix('-partial')}.yaml"
    sets = [f"steps={args.steps}", *placement_sets(placement), *args.overrides]
    if schedule.startswith("async"):  # no per-update trainer checkpoint: the overlapped runs save none either
        sets += [f"async.max_staleness={args.max_staleness}", "async.checkpoint=false"]
        sets += [f"async.partial_rollouts={str(schedule == 'async-partial').lower()}"]
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
            version_span_histogram=res.async_.version_span_histogram,
            sync_latency_s=[s.sync.latency_s for s in res.steps if s.sync is not None],
        )
    else:
        wall = sum(s.time_s.total for s in res.steps)
    row.update(wall_s=round(wall, 3), rollouts_trained_per_hour=round(trained / wall * 3600, 1))
    return row


def summarise(rows: list[dict], placements: list[str], schedules: list[str]) -> dict:
    """Per placement: for each later schedule over the first (``ratio_async_over_overlapped``), and
    ``async-partial`` over ``async`` when both ran, the ratio of rollouts trained per hour within each
    repeat (paired), and its mean with a 95% t-interval from two complete repeats on
    (``ratio_..._mean_ci95``; ``ratio_mean_ci95`` is async over overlapped's, as earlier results name it)."""
    pairs = [(s, schedules[0]) for s in schedules[1:]]
    if {"async", "async-partial"} <= set(schedules[1:]):
        pairs.append(("async-partial", "async"))
    out: dict = {}
    for placement in placements:
        mine = [r for r in rows if r["placement"] == placement]
        per = {s: [r["rollouts_trained_per_hour"] for r in mine if r["schedule"] == s] for s in schedules}
        entry: dict = {"per_hour": per}
        for a, b in pairs:
            ratios = [x / y for x, y in zip(per[a], per[b], strict=False)]  # complete repeats only
            key = f"ratio_{a}_over_{b}"
            entry[key] = [round(x, 3) for x in ratios]
            if len(ratios) >= 2:
                est = mean_ci(ratios)
                ci = [round(est.mean, 3), round(est.ci_low, 3), round(est.ci_high, 3)]
                entry[f"{key}_mean_ci95"] = ci
                if (a, b) == ("async", "overlapped"):
                    entry["ratio_mean_ci95"] = ci
        out[placement] = entry
    return out


def main() -> None:
    args = parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / (f"bench_async_{args.name}.json" if args.name else "bench_async.json")
    result = {
        "benchmark": "bench_async",
        "steps": args.steps,
        "repeats": args.repeats,
        "max_staleness": args.max_staleness,
        "schedules": args.schedules,
        "placements": {p: placement_sets(p) for p in args.placements},
        "overrides": args.overrides,
        "command": " ".join(["python", "benchmarks/bench_async.py", *sys.argv[1:]]),
        "complete": False,
        "summary": {},
        "runs": [],
        "machine": machine_fingerprint(),
    }
    for repeat in range(args.repeats):
        for schedule, placement in [(s, p) for p in args.placements for s in args.schedules]:
            result["runs"].append(run_one(schedule, placement, repeat, args))
            print(json.dumps(result["runs"][-1]), file=sys.stderr)
            # Written after every run: a later failure keeps the runs already made.
            result["summary"] = summarise(result["runs"], args.placements, args.schedules)
            atomic_write_json(path, result)
    result["complete"] = True
    atomic_write_json(path, result)
    print(json.dumps({"benchmark": "bench_async", **result["summary"]}))


if __name__ == "__main__":
    main()
