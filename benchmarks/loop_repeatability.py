"""How far the same loop run moves between two measurements on this machine: the floor under any planner error.

    python benchmarks/loop_repeatability.py runs/profile/cpu-2core /tmp/runs_p2 --name profile1_vs_profile2

Takes two folders of ``rlsim run`` outputs (``NAME/results.json``, e.g. the loop sets of two ``rlsim profile``
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
    p.add_argument("first", type=Path, help="folder of run folders (NAME/results.json)")
    p.add_argument("second", type=Path, help="the same run names, measured again")
    p.add_argument("--skip", type=int, default=1, help="warm-up steps left out of each run (default 1)")
    p.add_argument("--disturbed-above", type=float, default=0.15, help="foreign CPU share that drops a step")
    p.add_argument("--name", required=True, help="write loop_repeatability_NAME.json")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = p.parse_args()
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
    RlsimError when the work differs."""
    steps_a, steps_b = a.steps[skip:], b.steps[skip:]
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


def main() -> None:
    args = parse_args()
    pairs: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    dropped: dict[str, list[int]] = {}
    names = sorted(d.name for d in args.first.iterdir() if (d / "results.json").is_file())
    for name in names:
        other = args.second / name / "results.json"
        if not other.is_file():
            skipped[name] = f"no {other}"
            continue
        try:
            first = RunResults.read(args.first / name / "results.json")
            drop = disturbed(args.first / name, args.disturbed_above) | disturbed(other.parent, args.disturbed_above)
            pairs[name] = compare(first, RunResults.read(other), args.skip, drop)
            if drop:
                dropped[name] = sorted(drop)
        except RlsimError as err:
            skipped[name] = str(err)
    if not pairs:
        sys.exit(f"no run name in {args.first} has a comparable run in {args.second}: {skipped}")
    summary = {}
    for phase in PHASES:
        values = [abs(d[phase]) for d in pairs.values() if phase in d]
        if values:
            summary[phase] = {"median_abs": round(statistics.median(values), 4), "max_abs": round(max(values), 4)}
    result = {
        "benchmark": "loop_repeatability",
        "command": " ".join(["python", "benchmarks/loop_repeatability.py", *sys.argv[1:]]),
        "first": str(args.first),
        "second": str(args.second),
        "skip": args.skip,
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
