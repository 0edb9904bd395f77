"""What the router over reward replicas costs, against the scoring it routes (issue 28: "the router's overhead
under 2% of scoring time").

With ``replica: None`` the Ray backend (``rlsim/loop/backends/ray.py`` ``submit_score``) does two things a fixed
replica does not: it asks Ray which calls have come back (``ray.wait(in_flight, timeout=0)``) and has the router
pick the replica with the fewest outstanding (``rlsim.replica_router``). This benchmark times exactly those two
steps on real Ray object refs: ``--replicas`` actors, each holding ``--in-flight`` calls that sleep (so the wait
sees a realistic list of unfinished refs), repeated ``--calls`` times, in ``--rounds`` rounds; and, in the same
run, the scoring call it sits in front of: the ``--runtime`` scorer on one micro-batch of ``--micro-batch`` texts of
the loop's default workload (lognormal responses, mean 64 tokens; ``configs/default.yaml``), median of ``--rounds``
timed calls after a warm-up. Overhead = routing seconds per call / scoring seconds per call.

    python benchmarks/bench_router_overhead.py        # writes benchmarks/results/bench_router_overhead.json
    python benchmarks/bench_router_overhead.py --calls 200 --rounds 2 --out /tmp/router.json   # a short check

The last stdout line is the result JSON (with the machine's fingerprint).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "bench_router_overhead.json"


def routing_s_per_call(replicas: int, in_flight: int, calls: int) -> float:
    """Seconds per routed send: ``ray.wait(timeout=0)`` on the calls in flight, then pick and count."""
    import ray

    from rlsim.replica_router import ReplicaRouter

    @ray.remote(num_cpus=0)
    class Busy:
        def hold(self, seconds: float) -> None:
            time.sleep(seconds)

    actors = [Busy.options(max_concurrency=in_flight).remote() for _ in range(replicas)]  # type: ignore[attr-defined]
    pending = {a.hold.remote(600.0): r for r, a in enumerate(actors) for _ in range(in_flight)}
    router = ReplicaRouter(replicas)
    for replica in pending.values():
        router.sent(replica, 8)
    t0 = time.perf_counter()
    for _ in range(calls):
        done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        for ref in done:
            router.finished(pending.pop(ref))
        replica = router.pick()
        router.sent(replica, 8)
        router.finished(replica)  # keep the queue as it was: every call sees the same in-flight list
    elapsed = (time.perf_counter() - t0) / calls
    for a in actors:
        ray.kill(a)
    return elapsed


def scoring_s_per_call(runtime: str, micro_batch: int, rounds: int) -> float:
    """Median seconds of one scoring call on a micro-batch of the default loop workload's texts."""
    from rlsim.models import resolve_reward_model
    from rlsim.scoring import ScorerSettings, make_scorer
    from rlsim.workloads import LognormalLengths, WorkloadSpec, build_workload

    spec = WorkloadSpec(count=micro_batch, seed=0, response=LognormalLengths(mean=64, max=192))
    texts = build_workload(spec).texts
    scorer = make_scorer(runtime, resolve_reward_model("minilm-rm"), ScorerSettings(threads=1, max_length=256))
    try:
        scorer.score_batch(texts)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            scorer.score_batch(texts)
            times.append(time.perf_counter() - t0)
    finally:
        scorer.close()
    return statistics.median(times)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--in-flight", type=int, default=4, help="calls outstanding per replica while routing")
    p.add_argument("--calls", type=int, default=2000, help="routed sends timed per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runtime", default="native", help="the scorer whose call the routing sits in front of")
    p.add_argument("--micro-batch", type=int, default=8, help="rollouts per scoring call (configs/default.yaml)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if min(args.replicas, args.in_flight, args.calls, args.rounds, args.micro_batch) < 1:
        p.error("--replicas, --in-flight, --calls, --rounds and --micro-batch must be >= 1")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        routing = [routing_s_per_call(args.replicas, args.in_flight, args.calls) for _ in range(args.rounds)]
    finally:
        ray.shutdown()
    scoring = scoring_s_per_call(args.runtime, args.micro_batch, args.rounds)
    route = statistics.median(routing)
    result = {
        "benchmark": "router_overhead",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python benchmarks/bench_router_overhead.py " + " ".join(argv),
        "replicas": args.replicas,
        "in_flight_per_replica": args.in_flight,
        "routing_s_per_call": {"median": route, "rounds": routing},
        "scoring_s_per_call": {"median": scoring, "runtime": args.runtime, "micro_batch": args.micro_batch},
        "overhead_fraction": route / scoring,
        "target_fraction": 0.02,
        "meets_target": route / scoring < 0.02,
        "machine": machine_fingerprint(),
    }
    atomic_write_json(args.out, result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
