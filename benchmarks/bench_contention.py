"""The contention experiment as a benchmark: its wall time and measurement quality against the issue's targets.

    python benchmarks/bench_contention.py                 # --quick variant of configs/contention_cpu.yaml (< 5 min)
    python benchmarks/bench_contention.py --full          # the default: 10% target within a 28-minute budget
    python benchmarks/bench_contention.py --full --runtimes eager,ort-int8,native-int8 \
        --target-ci 0.10 --max-minutes 60 --name int8_target10   # runs until the int8 runtimes reach 10%
    python benchmarks/bench_contention.py --set contention.quick.repeats=3

Writes benchmarks/results/bench_contention_{quick,full,NAME}.json (the experiment's own results.json,
report.md and PNGs go to runs/bench_contention_{...}/); the last stdout line is one JSON object.
Targets: wall time (quick < 300 s, full < 1800 s, or --max-minutes); the freed-capacity CI half-width
against the run's target_ci (how the repeats stopped, and how many more the target would need);
accounting identity within 5 % in every measured step. The load average before and after is recorded:
other work on the machine slows and widens everything, so measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.experiment.config import load_contention_config  # noqa: E402
from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402

TIME_TARGET_S = {"quick": 300.0, "full": 1800.0}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(ROOT / "configs" / "contention_cpu.yaml"))
    p.add_argument("--full", action="store_true", help="the default experiment instead of --quick")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--runtimes", default=None, help="comma-separated runtimes, e.g. eager,ort-int8,native-int8")
    p.add_argument("--target-ci", type=float, default=None, help="as rlsim experiment contention --target-ci")
    p.add_argument("--max-minutes", type=float, default=None, help="as rlsim experiment contention --max-minutes")
    p.add_argument("--name", default=None, help="result name (default: quick or full)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    return p.parse_args()


def per_runtime(results: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "step_time_s",
        "step_time_change",
        "step_time_change_unpaired",
        "scoring_core_s",
        "freed_core_s",
        "freed_pool_share",
        "gen_slowdown",
        "score_slowdown",
        "timeboxed_rollouts_per_hour",
        "extra_rollouts_per_hour",
        "extra_rollouts_per_step",
        "freed_ci_half_width_fraction",
    )
    out = {}
    for name, f in results["runtimes"].items():
        row = {k: f[k] for k in keep}
        row["precision"] = f.get("precision")  # half-width reached, target, stopped_by, further repeats
        row["meets_ci_target"] = None if not f.get("precision") else f["precision"]["met"]
        out[name] = row
    return out


def main() -> int:
    from rlsim.experiment.runner import run_contention
    from rlsim.scoring.base import expand_runtimes

    args = parse_args()
    mode = "full" if args.full else "quick"
    name = args.name or mode
    runtimes = expand_runtimes(args.runtimes) if args.runtimes else None
    config = load_contention_config(
        args.config,
        args.overrides,
        quick=not args.full,
        runtimes=runtimes,
        target_ci=args.target_ci,
        max_minutes=args.max_minutes,
    )
    s = config.contention
    time_target = args.max_minutes * 60.0 if args.max_minutes else TIME_TARGET_S[mode]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    results = run_contention(config, ROOT / "runs" / f"bench_contention_{name}")
    wall = time.perf_counter() - t0
    acc = results["accounting"]
    result = {
        "benchmark": "contention",
        "mode": mode,
        "command": "python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "config": str(args.config),
        "overrides": args.overrides,
        "runtimes": list(s.runtimes),
        "repeats": s.repeats,
        "repeats_done": results["repeats_done"],
        "stopping": results["stopping"],
        "wall_s": round(wall, 1),
        "time_target_s": time_target,
        "meets_time_target": wall < time_target,
        "startup_s": [session["startup_s"] for session in results["sessions"]],
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "accounting": acc,
        "identity_holds_every_step": acc["within_5pct"] == acc["checked"],
        "figures": per_runtime(results),
        "conclusions": results["conclusions"],
    }
    result["machine"] = machine_fingerprint()
    atomic_write_json(Path(args.out) / f"bench_contention_{name}.json", result)
    print(
        json.dumps(
            {
                "mode": mode,
                "wall_s": result["wall_s"],
                "meets_time_target": result["meets_time_target"],
                "repeats_done": result["repeats_done"],
                "stopped": results["stopping"]["reason"],
                "half_width_fraction": {
                    k: (v["precision"] or {}).get("half_width_fraction")
                    for k, v in result["figures"].items()
                    if v["precision"]
                },
                "identity_within_5pct": f"{acc['within_5pct']}/{acc['checked']}",
                "freed_core_s": {k: v["freed_core_s"]["mean"] for k, v in result["figures"].items()},
                "gen_slowdown": {k: v["gen_slowdown"]["mean"] for k, v in result["figures"].items()},
            }
        )
    )
    return 0


def machine() -> dict[str, Any]:
    """CPU model, the flags that choose kernels, cores: measurements differ between machines of one kind."""
    info: dict[str, Any] = {"cpus": os.cpu_count()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and "cpu_model" not in info:
            info["cpu_model"] = value.strip()
        if key.strip() == "flags" and "flags" not in info:
            wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni")
            info["flags"] = [f for f in wanted if f in value.split()]
    return info


if __name__ == "__main__":
    sys.exit(main())
