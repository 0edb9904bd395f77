"""How far the same loop run moves between two measurements on this machine: the floor under any planner error.

    python benchmarks/loop_repeatability.py --run configs/profiles/calibrate_cpu.yaml --rounds 3 --name floor
    python benchmarks/loop_repeatability.py runs/profile/cpu-2core /tmp/runs_p2 --name profile1_vs_profile2

``--run SET.yaml`` measures the floor itself, interleaved: every configuration of the loop set (a profile's
calibration set or a validation set) runs ``--rounds`` times as A B C, A B C, ... into ``--runs``/round-R/NAME
(``rlsim.planner.measure.loop_runner.run_rounds``), so a configuration's runs are one round apart and the host's
drift over the session reaches all alike; each configuration is compared with its next round, and the floor is
the mean |difference| of ``total`` over those pairs with a 95% t-interval, beside its median and worst.

Or it takes two folders of ``rlsim run`` outputs (``NAME/results.json``, e.g. the loop sets of two ``rlsim profile``
runs, or two ``rlsim plan validate --out`` folders) and, for every run name in both, compares the steps after
``--skip`` warm-up steps: per phase (``total``, ``generate``, ``score``, ``update``, ``sync``), the relative
difference ``sum(A) / sum(B) - 1``. A pair is used only when both runs generated the same tokens in every
compared step (same config and seeds: the work is identical, only the machine's speed differs), else it is
listed as skipped with the reason. A step during which other programs took more than ``--disturbed-above``
of the cores in either run (``machine_load.json`` beside ``results.json``) is left out of both. A planner
cannot predict a run closer than the run repeats itself, so the median and worst |difference| of ``total``
is the accuracy a validation on this machine can show.

Writes ``benchmarks/results/loop_repeatability_NAME.json``; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.errors import RlsimError  # noqa: E402
from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402
from rlsim.planner.measure.loop_runner import LOAD_FILE  # noqa: E402
from rlsim.run_results import RunResults  # noqa: E402

PHASES = ("total", "generate", "score", "update", "sync")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first", type=Path, nargs="?", help="folder of run folders (NAME/results.json)")
    p.add_argument("second", type=Path, nargs="?", help="the same run names, measured again")
    p.add_argument("--run", type=Path, default=None, help="a loop set YAML: run it --rounds times, interleaved")
    p.add_argument("--rounds", type=int, default=2, help="with --run: rounds of the whole set (>= 2)")
    p.add_argument(
        "--runs", type=Path, default=None, help="with --run: folder for the rounds (runs/repeatability/NAME)"
    )
    p.add_argument("--only", default=None, help="with --run: comma-separated configuration names of the set to run")
    p.add_argument(
        "--skip",
        type=int,
        default=1,
        help="warm-up steps left out of each run (default 1; a run that records its own warmup_steps: that)",
    )
    p.add_argument("--disturbed-above", type=float, default=0.15, help="foreign CPU share that drops a step")
    p.add_argument("--name", required=True, help="write loop_repeatability_NAME.json")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = p.parse_args()
    if args.run is not None:
        if args.first or args.second:
            p.error("give either --run SET.yaml or two folders of runs, not both")
        if not args.run.is_file():
            p.error(f"{args.run}: no such loop set YAML")
        if args.rounds < 2:
            p.error("--rounds must be at least 2 (a run is compared with its next round)")
        return args
    if args.first is None or args.second is None:
        p.error("give two folders of runs to compare, or --run SET.yaml to measure them interleaved")
    for folder in (args.first, args.second):
        if not folder.is_dir():
            p.error(f"{folder} is not a folder of run outputs (NAME/results.json)")
    if args.skip < 0:
        p.error("--skip must be >= 0")
    return args


def disturbed(run_dir: Path, above: float) -> set[int]:
    """Steps of the run in ``run_dir`` during which other programs took more than ``above`` of the cores."""
    path = run_dir / LOAD_FILE
    if not path.is_file():
        return set()
    steps = json.loads(path.read_text()).get("steps", [])
    return {s["step"] for s in steps if (s.get("foreign_cpu_share") or 0.0) > above}


def compare(a: RunResults, b: RunResults, skip: int, drop: Collection[int] = ()) -> dict[str, float]:
    """Per phase, ``sum over compared steps of a / of b - 1`` (steps numbered in ``drop`` left out);
    RlsimError when the work differs. A run that records its own warm-up (``warmup_steps``: the runner
    runs none on warm actors) drops that many instead of ``skip``."""
    steps_a, steps_b = a.steps[a.warmup(skip) :], b.steps[b.warmup(skip) :]
    if not steps_a or len(steps_a) != len(steps_b):
        raise RlsimError(f"{len(steps_a)} vs {len(steps_b)} steps after the first {skip}")
    tokens_a = [s.tokens.generated if s.tokens else None for s in steps_a]
    tokens_b = [s.tokens.generated if s.tokens else None for s in steps_b]
    if None in tokens_a or tokens_a != tokens_b:
        raise RlsimError(f"generated tokens differ ({tokens_a} vs {tokens_b}): not the same work")
    kept = [(x, y) for x, y in zip(steps_a, steps_b, strict=True) if x.step not in drop]
    if not kept:
        raise RlsimError(f"every compared step was disturbed by other programs (steps {sorted(drop)})")
    out = {}
    for phase in PHASES:
        ta = sum(float(getattr(x.time_s, phase)) for x, _ in kept)
        tb = sum(float(getattr(y.time_s, phase)) for _, y in kept)
        if tb > 0:
            out[phase] = ta / tb - 1.0
    return out


def compare_folders(
    first: Path, second: Path, skip: int, disturbed_above: float
) -> tuple[dict[str, dict[str, float]], dict[str, str], dict[str, list[int]]]:
    """Every run name in both folders compared (``compare``): the differences, the names skipped with the
    reason, and the disturbed steps left out per name."""
    pairs: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    dropped: dict[str, list[int]] = {}
    for name in sorted(d.name for d in first.iterdir() if (d / "results.json").is_file()):
        other = second / name / "results.json"
        if not other.is_file():
            skipped[name] = f"no {other}"
            continue
        try:
            one = RunResults.read(first / name / "results.json")
            drop = disturbed(first / name, disturbed_above) | disturbed(other.parent, disturbed_above)
            pairs[name] = compare(one, RunResults.read(other), skip, drop)
            if drop:
                dropped[name] = sorted(drop)
        except RlsimError as err:
            skipped[name] = str(err)
    return pairs, skipped, dropped


def interleaved(args: argparse.Namespace) -> tuple[list[Path], int, float]:
    """Run the loop set of ``--run`` in ``--rounds`` interleaved rounds; the round folders, the set's
    warm-up steps and its disturbed-step threshold."""
    from rlsim.planner.measure.loop_runner import RealLoopRunner, run_rounds
    from rlsim.planner.measure.loop_set import load_loop_set, resolve_cases
    from rlsim.progress import make_console

    loop_set, base_dir = load_loop_set(args.run)
    cases = resolve_cases(loop_set, base_dir, source=str(args.run))  # every config checked before anything runs
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {c.name for c in cases})
        if unknown:
            sys.exit(f"--only: {', '.join(unknown)} not in {args.run} (it has: {', '.join(c.name for c in cases)})")
        cases = [c for c in cases if c.name in wanted]
    console = make_console()
    runs = args.runs or ROOT / "runs" / "repeatability" / args.name
    runner = RealLoopRunner(console, quiet=loop_set.quiet)
    folders = run_rounds(cases, runner, args.rounds, runs, note=console.print)
    threshold = args.disturbed_above if loop_set.disturbed_above is None else loop_set.disturbed_above
    return folders, loop_set.warmup_steps, threshold


def floor_summary(pairs: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Per phase the median and worst |difference| over ``pairs``; and, with two pairs or more, the mean
    |difference| with a 95% t-interval (the identical-run floor)."""
    from rlsim.metrics.stats import mean_ci

    summary: dict[str, dict[str, Any]] = {}
    for phase in PHASES:
        values = [abs(d[phase]) for d in pairs.values() if phase in d]
        if not values:
            continue
        summary[phase] = {"median_abs": round(statistics.median(values), 4), "max_abs": round(max(values), 4)}
        if len(values) >= 2:
            est = mean_ci(values)
            summary[phase]["mean_abs"] = round(est.mean, 4)
            # A t-interval on |differences| can reach below 0, which no |difference| can: cut there.
            summary[phase]["mean_abs_ci95"] = [round(max(est.ci_low, 0.0), 4), round(est.ci_high, 4)]
    return summary


def main() -> None:
    args = parse_args()
    if args.run is not None:
        folders, skip, threshold = interleaved(args)
        pairs: dict[str, dict[str, float]] = {}
        skipped: dict[str, str] = {}
        dropped: dict[str, list[int]] = {}
        for r, (a, b) in enumerate(zip(folders, folders[1:], strict=False), start=1):
            got, why, drop = compare_folders(a, b, skip, threshold)
            pairs.update({f"{name}@round{r}-{r + 1}": d for name, d in got.items()})
            skipped.update({f"{name}@round{r}-{r + 1}": w for name, w in why.items()})
            dropped.update({f"{name}@round{r}-{r + 1}": d for name, d in drop.items()})
        first, second = str(folders[0].parent), f"{len(folders)} interleaved rounds"
    else:
        skip = args.skip
        pairs, skipped, dropped = compare_folders(args.first, args.second, skip, args.disturbed_above)
        first, second = str(args.first), str(args.second)
    if not pairs:
        sys.exit(f"no comparable runs: {skipped}")
    summary = floor_summary(pairs)
    result = {
        "benchmark": "loop_repeatability",
        "command": " ".join(["python", "benchmarks/loop_repeatability.py", *sys.argv[1:]]),
        "first": first,
        "second": second,
        "skip": skip,
        "summary": summary,
        "pairs": {k: {p: round(v, 4) for p, v in d.items()} for k, d in pairs.items()},
        "skipped": skipped,
        "disturbed_steps_left_out": dropped,
        "machine": machine_fingerprint(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / f"loop_repeatability_{args.name}.json", result)
    print(json.dumps({"benchmark": "loop_repeatability", "pairs": len(pairs), **summary}))


if __name__ == "__main__":
    main()
