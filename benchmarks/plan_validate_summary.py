"""The whole validation set's error: several `rlsim plan validate` reports read as one.

    python benchmarks/plan_validate_summary.py runs/validate/validate.json runs/validate_extra/validate.json \
        runs/validate_ppo/validate.json --out benchmarks/results/plan_validate_whole.json

Each report comes from one set (configs/validate_cpu.yaml, validate_cpu_extra.yaml, validate_cpu_ppo.yaml,
run with the same profile); the summary has the median, mean and largest |error| over every configuration
of them, and the same per algorithm (``by_algorithm``: PPO apart from GRPO); where the reports were anchored
(``rlsim plan validate``'s default, docs/planner.md), the anchored figures too (``anchored``) and each set's
drift and identical-run floor. Each source's machine fingerprint, profile, date and anchor are kept. An
interrupted report is refused. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.io import atomic_write_json  # noqa: E402
from rlsim.planner.measure.loop_results import read_json  # noqa: E402
from rlsim.planner.validate.compare import merged_report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", type=Path, nargs="+", help="validate.json files of `rlsim plan validate`")
    p.add_argument("--out", type=Path, default=None, help="write the merged report here")
    args = p.parse_args(argv)
    merged = merged_report([(str(path), read_json(path)) for path in args.reports])
    if args.out:
        atomic_write_json(args.out, merged)
    lines = [f"all ({len(merged['configs'])}): median |error| {merged['median_abs_error']:.1%}"]
    lines += [
        f"{name} ({g['configs']}): median |error| {g['median_abs_error']:.1%}, max {g['max_abs_error']:.1%}"
        for name, g in merged["by_algorithm"].items()
    ]
    if "anchored" in merged:
        a = merged["anchored"]
        lines.append(
            f"anchored ({a['configs']}): median |error| {a['median_abs_error']:.1%}, max {a['max_abs_error']:.1%}"
        )
    for source in merged["sources"]:
        anchor = source.get("anchor") or {}
        if anchor.get("floor"):
            lines.append(
                f"{source['validation_set']}: host drift {anchor['drift']:+.1%}, identical-run floor "
                f"{anchor['floor']['mean_abs_change']:.1%} over {anchor['floor']['n']} anchor pairs"
            )
    print("\n".join(lines))
    keys = ("median_abs_error", "mean_abs_error", "max_abs_error", "by_algorithm", "anchored")
    summary = {k: merged[k] for k in keys if k in merged}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
