"""Two runtimes of one contention experiment against each other, paired by repeat.

`rlsim experiment contention` reports every runtime against its baseline (eager). Which of two others frees more
capacity is the difference of their freed core-s, i.e. of their scoring core-s per together step, repeat by repeat
(both ran in the same Ray session and hour of each repeat); this prints and writes that paired difference with its
t interval, t test and exact sign-flip test (rlsim.metrics.stats).

    python benchmarks/contention_pair.py RESULTS.json native vllm [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlsim.experiment.capacity import paired, per_repeat
from rlsim.io import atomic_write_json
from rlsim.metrics.stats import mean_ci, paired_t_p, sign_flip_p

SCORE_CORE_S = "together.score_core_s"  # rlsim.experiment.capacity.per_repeat's key: mean over a repeat's trials


def compare(results: dict, per: dict, a: str, b: str) -> dict:
    """How many more core-s per together step ``b`` scores with than ``a`` (positive: ``a`` frees more); ``per``:
    ``per_repeat`` of the results' measurements."""
    sb, sa = paired(per, (b, SCORE_CORE_S), (a, SCORE_CORE_S))
    if len(sa) < 2:
        raise ValueError(f"{a} and {b} share {len(sa)} repeat(s) in these results; at least 2 are needed")
    diffs = [y - x for x, y in zip(sa, sb, strict=True)]
    est = mean_ci(diffs)
    return {
        "a": a,
        "b": b,
        "what": f"scoring core-s per together step, {b} minus {a} (= {a}'s freed core-s minus {b}'s)",
        "repeats": sorted(set(per[a][SCORE_CORE_S]) & set(per[b][SCORE_CORE_S])),
        "per_repeat": [round(d, 4) for d in diffs],
        "mean": est.mean,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "paired_t_p": paired_t_p(diffs),
        "sign_flip_p": sign_flip_p(diffs),
        "machine": results.get("machine"),  # recorded by the experiment since 2026-12-06
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", type=Path, help="results.json of rlsim experiment contention")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--json", type=Path, help="also write the comparison here")
    args = p.parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
        per = per_repeat(results["measurements"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"contention_pair: {args.results} is not a contention results.json ({err!r}); give the experiment's "
              "results.json", file=sys.stderr)  # fmt: skip
        return 2
    try:
        out = compare(results, per, args.a, args.b)
    except ValueError as err:
        print(f"contention_pair: {err}", file=sys.stderr)
        return 2
    print(
        f"{out['what']}: {out['mean']:+.3f} [{out['ci_low']:+.3f}, {out['ci_high']:+.3f}] over "
        f"{len(out['repeats'])} repeats (paired t p = {out['paired_t_p']:.3g}, sign-flip p = {out['sign_flip_p']:.3g})"
    )
    if args.json:
        atomic_write_json(args.json, {"source": str(args.results), **out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
