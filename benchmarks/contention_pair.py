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
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from rlsim.io import atomic_write_json
from rlsim.metrics.stats import mean_ci, paired_t_p, sign_flip_p


def scoring_core_s_by_repeat(results: dict, runtime: str) -> dict[int, float]:
    """Mean scoring core-s of ``runtime``'s together steps (over trials) per repeat."""
    per: dict[int, list[float]] = defaultdict(list)
    for m in results["measurements"]:
        if m["condition"] == "together" and m["runtime"] == runtime:
            per[m["repeat"]].append(m["figures"]["score_core_s"])
    return {r: statistics.mean(v) for r, v in per.items()}


def compare(results: dict, a: str, b: str) -> dict:
    """How many more core-s per together step ``b`` scores with than ``a`` (positive: ``a`` frees more)."""
    sa, sb = scoring_core_s_by_repeat(results, a), scoring_core_s_by_repeat(results, b)
    repeats = sorted(set(sa) & set(sb))
    if len(repeats) < 2:
        raise SystemExit(f"{a} and {b} share {len(repeats)} repeat(s) in these results; at least 2 are needed")
    diffs = [sb[r] - sa[r] for r in repeats]
    est = mean_ci(diffs)
    return {
        "a": a,
        "b": b,
        "what": f"scoring core-s per together step, {b} minus {a} (= {a}'s freed core-s minus {b}'s)",
        "repeats": repeats,
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
    out = compare(json.loads(args.results.read_text()), args.a, args.b)
    print(
        f"{out['what']}: {out['mean']:+.3f} [{out['ci_low']:+.3f}, {out['ci_high']:+.3f}] over "
        f"{len(out['repeats'])} repeats (paired t p = {out['paired_t_p']:.3g}, sign-flip p = {out['sign_flip_p']:.3g})"
    )
    if args.json:
        atomic_write_json(args.json, {"source": str(args.results), **out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
