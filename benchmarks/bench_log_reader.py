"""Reading and fitting a 10 MB training log: ``rlsim profile --from-log`` in under 10 s and 300 MB (issue 27).

    python benchmarks/bench_log_reader.py                 # writes benchmarks/results/bench_log_reader.json
    python benchmarks/bench_log_reader.py --mb 1 --out /tmp/log_reader.json   # a short check

The log is verl console output as a Ray job prints it (``tests/helpers/log_cases.py``: coloured
``(TaskRunner pid=N)`` prefix, ``np.float64(x)`` values, validation every 10 steps, a checkpoint every
50), padded per step with the worker lines a real run prints between steps, to ``--mb`` megabytes.
Each repeat runs the whole command (read, fit, in-sample and held-out replay, profile and summary
written) in a fresh process; wall seconds and the child's peak resident memory (``ru_maxrss``) are
recorded, plus the reading alone in this process. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402
from rlsim.planner.profile.logs.frameworks import load_framework_log  # noqa: E402
from tests.helpers import log_cases  # noqa: E402

TARGET_S = 10.0
TARGET_MB = 300.0
_NOISE = (
    "\x1b[36m(WorkerDict pid=48377)\x1b[0m INFO 12-02 10:00:00 [fsdp_workers.py:512] Actor use_remove_padding=True "
    "use_fused_kernels=False, memory allocated 41.2 GB, reserved 52.7 GB, device 0, rank {rank}"
)


def write_log(path: Path, megabytes: float) -> int:
    """A verl console log of about ``megabytes`` MB; returns its step count."""
    per_step = "\n".join(log_cases.as_ray_captured(log_cases.verl_console(log_cases.verl_steps(1)), twice=False))
    noise = "\n".join(_NOISE.format(rank=r) for r in range(16))
    steps = max(12, int(megabytes * 1e6 / (len(per_step) + len(noise) + 2)))
    lines = log_cases.as_ray_captured(
        log_cases.verl_console(log_cases.verl_steps(steps, test_freq=10, save_freq=50, seed=1)), twice=False
    )
    with path.open("w") as f:
        for line in lines:
            f.write(noise + "\n" + line + "\n")
    return steps


def run_once(log: Path, tmp: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one ``rlsim profile --from-log`` in a fresh process."""
    cmd = [sys.executable, "-m", "rlsim.cli.main", "profile", "--from-log", str(log), "--out", str(tmp / "p.json")]
    cmd += ["--summary", str(tmp / "s.json")]
    code = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code, *cmd], check=True, capture_output=True, text=True, cwd=ROOT)
    wall, rss = out.stdout.split()
    return float(wall), float(rss)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=10.0, help="log size in MB (default 10)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_log_reader.json")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        log = tmp / "train.log"
        steps = write_log(log, args.mb)
        size_mb = log.stat().st_size / 1e6
        t0 = time.perf_counter()
        read = load_framework_log(log)
        read_s = time.perf_counter() - t0
        runs = [run_once(log, tmp) for _ in range(args.repeats)]
        summary = json.loads((tmp / "s.json").read_text())
    walls, rss = [w for w, _ in runs], [r for _, r in runs]
    result = {
        "benchmark": "bench_log_reader",
        "log_mb": round(size_mb, 2),
        "steps": steps,
        "steps_read": len(read.steps),
        "read_only_s": read_s,
        "command_wall_s": walls,
        "command_wall_s_median": statistics.median(walls),
        "command_peak_rss_mb": rss,
        "command_peak_rss_mb_max": max(rss),
        "targets": {"wall_s": TARGET_S, "rss_mb": TARGET_MB},
        "meets_targets": statistics.median(walls) < TARGET_S and max(rss) < TARGET_MB,
        "in_sample_median_abs_error": summary["in_sample"]["median_abs_error"],
        "held_out_median_abs_error": summary["held_out"]["median_abs_error"],
        "held_out_total_error": summary["held_out"]["total_error"],
        "load_average": os.getloadavg(),
        "this_process_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "machine": machine_fingerprint(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    atomic_write_json(args.out, result)
    print(json.dumps({k: result[k] for k in result if k != "machine"}))


if __name__ == "__main__":
    main()
