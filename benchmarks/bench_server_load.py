"""Load test of ``rlsim serve`` on loopback: N closed-loop clients per level, for a bounded time each.

    python benchmarks/bench_server_load.py                            # sweep 1..64 clients, 20 s each
    python benchmarks/bench_server_load.py --levels 1,8,32 --seconds 5 # a short run
    python benchmarks/bench_server_load.py --levels 4 --seconds 3 --trace /tmp/load-trace.json

Each client sends ``--texts-per-request`` texts (drawn from a seeded workload), waits for the answer
and sends again; on 503 it honours ``Retry-After`` (capped at 1 s), as a polite client would. Per
level: throughput, p50/p99 latency of answered requests, answers by kind (ok, 503, 504, other 4xx,
5xx) and ``lost`` (sent, never answered). Every reward is checked against the reward of the same
text scored alone ("wrong_answers"), and the server's own /metrics counts of answers by status must
equal the clients' ("answered_exactly_once", with ``lost`` == 0). The server and this load generator are
pinned to different cores when there are at least two, so the clients do not steal the model's CPU.

JSON (benchmarks/results/bench_server_load.json; last stdout line): top-level ``requests_ok``,
``rejected_503``, ``errors_5xx``, ``lost`` are totals over the sweep; ``p50_s``/``p99_s`` are at
the sustained load (the most clients with p99 <= 1 s); ``p99_over_1s_at_clients`` is the first
level past it; ``levels`` holds every level's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402
from rlsim.metrics.stats import percentiles  # noqa: E402
from rlsim.workloads import LognormalLengths, WorkloadSpec, build_workload  # noqa: E402

P99_LIMIT_S = 1.0
REWARD_TOLERANCE = 1e-3  # batch company changes padding, which moves fp32 rewards by ~1e-6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runtime", default="ort")
    p.add_argument("--model", default="minilm-rm")
    p.add_argument("--levels", default="1,2,4,8,16,32,64", help="concurrent clients per level")
    p.add_argument("--seconds", type=float, default=20.0, help="sending time per level, s")
    p.add_argument("--texts-per-request", type=int, default=4)
    p.add_argument("--response-tokens", type=float, default=64.0, help="mean response length, tokens")
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--sub-batch-size", type=int, default=8, help="the server's length-sorted passes (0: one pass)")
    p.add_argument("--max-queue", type=int, default=128, help="server queue bound, sequences (503 past it)")
    p.add_argument("--timeout-s", type=float, default=10.0, help="server per-request timeout (504 past it)")
    p.add_argument("--threads", type=int, default=1, help="model threads in the server")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_server_load.json"))
    p.add_argument(
        "--trace",
        default=None,
        metavar="FILE",
        help="also write every request as a span (Trace Event Format, one track per load level)",
    )
    return p.parse_args(argv)


def start_server(args: argparse.Namespace, workdir: Path, cores: set[int]) -> tuple[subprocess.Popen[bytes], str]:
    port_file = workdir / "port"
    cmd = [sys.executable, "-m", "rlsim", "serve", "--runtime", args.runtime, "--model", args.model, "--port", "0"]
    cmd += ["--port-file", str(port_file), "--threads", str(args.threads), "--parent-pid", str(os.getpid())]
    cmd += ["--max-batch-size", str(args.max_batch_size), "--sub-batch-size", str(args.sub_batch_size)]
    cmd += ["--max-queue", str(args.max_queue)]
    cmd += ["--timeout-s", str(args.timeout_s), "--max-texts", str(max(args.texts_per_request, 1))]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    log = open(workdir / "server.log", "wb")
    pin = lambda: os.sched_setaffinity(0, cores)  # noqa: E731 - runs in the child before exec
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=pin)
    deadline = time.monotonic() + 900  # a first run may export the ONNX graph
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"server exited ({proc.returncode}):\n{(workdir / 'server.log').read_text()[-2000:]}")
        if port_file.is_file():
            url = f"http://127.0.0.1:{int(port_file.read_text())}"
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    return proc, url
            except httpx.TransportError:
                pass
        if time.monotonic() > deadline:
            raise SystemExit("server never became ready")
        time.sleep(0.2)


def stop_server(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM (graceful: exit status 0), SIGKILL after 60 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def server_answers(url: str) -> dict[str, float]:
    """The server's own count of /score answers by status code (from /metrics)."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=30).text):
        for s in family.samples:
            if s.name == "rlsim_serve_requests_total" and s.labels.get("endpoint") == "/score":
                counts[s.labels["status"]] = s.value
    return counts


def check_exactly_once(level: dict[str, Any], before: dict[str, float], after: dict[str, float]) -> None:
    """Every request the clients saw answered was answered once by the server, and none was lost."""
    served = {code: after.get(code, 0) - before.get(code, 0) for code in after}
    level["server_answers"] = {code: int(n) for code, n in served.items() if n}
    client = {"200": level["ok"], "503": level["rejected_503"], "504": level["timeout_504"]}
    others = sum(n for code, n in served.items() if code not in client)
    level["answered_exactly_once"] = (
        all(served.get(code, 0) == n for code, n in client.items())
        and others == level["errors_4xx"] + level["errors_5xx"]
        and level["lost"] == 0
    )


def reference_rewards(url: str, texts: list[str]) -> np.ndarray:
    """Each text scored alone: what every batched answer must match."""
    with httpx.Client(base_url=url, timeout=60) as client:
        return np.asarray([client.post("/score", json={"texts": [t]}).json()["rewards"][0] for t in texts])


class Tally:
    """Answers of one level, counted by kind; latencies (s) of ok answers only."""

    def __init__(self) -> None:
        self.kinds = {"ok": 0, "rejected_503": 0, "timeout_504": 0, "errors_4xx": 0, "errors_5xx": 0, "lost": 0}
        self.latencies: list[float] = []
        self.sequences = 0
        self.wrong_answers = 0
        self.spans: list[tuple[float, float, str]] = []  # (sent, answered) perf_counter seconds, answer kind


async def client_loop(
    client: httpx.AsyncClient,
    args: argparse.Namespace,
    pool: list[str],
    ref: np.ndarray,
    stop_at: float,
    rng: np.random.Generator,
    tally: Tally,
) -> None:
    while time.monotonic() < stop_at:
        idx = rng.integers(0, len(pool), size=args.texts_per_request)
        t0 = time.perf_counter()
        try:
            r = await client.post("/score", json={"texts": [pool[i] for i in idx]}, timeout=args.timeout_s + 30)
        except httpx.HTTPError:
            tally.kinds["lost"] += 1
            tally.spans.append((t0, time.perf_counter(), "lost"))
            continue
        seconds = time.perf_counter() - t0
        tally.spans.append((t0, t0 + seconds, str(r.status_code)))
        if r.status_code == 200:
            rewards = np.asarray(r.json()["rewards"])
            tally.kinds["ok"] += 1
            tally.latencies.append(seconds)
            tally.sequences += len(idx)
            ok = rewards.shape == idx.shape and np.allclose(rewards, ref[idx], atol=REWARD_TOLERANCE, rtol=0)
            tally.wrong_answers += 0 if ok else 1
        elif r.status_code == 503:
            tally.kinds["rejected_503"] += 1
            await asyncio.sleep(min(1.0, float(r.headers.get("retry-after", 1))))
        elif r.status_code == 504:
            tally.kinds["timeout_504"] += 1
        else:
            tally.kinds["errors_5xx" if r.status_code >= 500 else "errors_4xx"] += 1


async def run_level(
    url: str, clients: int, args: argparse.Namespace, pool: list[str], ref: np.ndarray
) -> dict[str, Any]:
    tally = Tally()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    rngs = [np.random.default_rng([args.seed, clients, c]) for c in range(clients)]
    async with httpx.AsyncClient(base_url=url, limits=limits) as client:
        t0 = time.monotonic()
        await asyncio.gather(*(client_loop(client, args, pool, ref, t0 + args.seconds, rng, tally) for rng in rngs))
        elapsed = time.monotonic() - t0  # includes draining the requests in flight at the end
    lat = percentiles(tally.latencies, (50, 99)) if tally.latencies else {"p50": None, "p99": None}
    spans = [{"track": f"{clients:>3} clients", "name": kind, "start": a, "end": b} for a, b, kind in tally.spans]
    return {
        "_spans": spans,
        "clients": clients,
        "seconds": round(elapsed, 3),
        "requests_per_s": round(tally.kinds["ok"] / elapsed, 3),
        "sequences_per_s": round(tally.sequences / elapsed, 3),
        **tally.kinds,
        "wrong_answers": tally.wrong_answers,
        "p50_s": lat["p50"],
        "p99_s": lat["p99"],
    }


def summarise(levels: list[dict[str, Any]], args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, Any]:
    within = [lv for lv in levels if lv["p99_s"] is not None and lv["p99_s"] <= P99_LIMIT_S]
    sustained = max(within, key=lambda lv: lv["clients"]) if within else None
    past = [lv for lv in levels if lv["p99_s"] is None or lv["p99_s"] > P99_LIMIT_S]
    kinds = ("ok", "rejected_503", "timeout_504", "errors_4xx", "errors_5xx", "lost")
    total = {k: sum(lv[k] for lv in levels) for k in kinds}
    return {
        "benchmark": "server_load",
        "requests_ok": total["ok"],
        "rejected_503": total["rejected_503"],
        "timeout_504": total["timeout_504"],
        "errors_4xx": total["errors_4xx"],
        "errors_5xx": total["errors_5xx"],
        "lost": total["lost"],
        "wrong_answers": sum(lv["wrong_answers"] for lv in levels),
        "answered_exactly_once": all(lv["answered_exactly_once"] for lv in levels),
        "p50_s": sustained["p50_s"] if sustained else None,
        "p99_s": sustained["p99_s"] if sustained else None,
        "sustained_clients": sustained["clients"] if sustained else None,
        "sustained_requests_per_s": sustained["requests_per_s"] if sustained else None,
        "sustained_sequences_per_s": sustained["sequences_per_s"] if sustained else None,
        "p99_over_1s_at_clients": past[0]["clients"] if past else None,
        "levels": levels,
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        **meta,
    }


def write_trace(path: str, spans: list[dict[str, Any]]) -> None:
    """Requests as Trace Event Format spans (times from the first request sent; lanes = requests in flight)."""
    from rlsim.metrics.trace import trace_events, validate_trace

    origin = min((s["start"] for s in spans), default=0.0)
    doc = {"traceEvents": trace_events([dict(s, start=s["start"] - origin, end=s["end"] - origin) for s in spans])}
    problems = validate_trace(doc)
    assert not problems, problems[:3]
    atomic_write_json(path, doc)


def main(argv: list[str] | None = None) -> int:
    import json

    from rich.progress import Progress

    args = parse_args(argv)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    cores = sorted(os.sched_getaffinity(0))
    server_cores, client_cores = ({cores[0]}, set(cores[1:])) if len(cores) > 1 else (set(cores), set(cores))
    spec = WorkloadSpec(count=128, seed=args.seed, response=LognormalLengths(mean=args.response_tokens, max=256))
    pool = build_workload(spec).texts
    with tempfile.TemporaryDirectory(prefix="rlsim-load-") as tmp:
        t0 = time.perf_counter()
        proc, url = start_server(args, Path(tmp), server_cores)
        os.sched_setaffinity(0, client_cores)
        try:
            meta = {
                "server_start_s": round(time.perf_counter() - t0, 2),
                "server_cores": sorted(server_cores),
                "client_cores": sorted(client_cores),
                "load_average_1m_at_start": os.getloadavg()[0],
            }
            ref = reference_rewards(url, pool)
            results: list[dict[str, Any]] = []
            spans: list[dict[str, Any]] = []
            with Progress(transient=True) as progress:
                task = progress.add_task("load levels", total=len(levels))
                for clients in levels:
                    before = server_answers(url)
                    level = asyncio.run(run_level(url, clients, args, pool, ref))
                    spans += level.pop("_spans")
                    check_exactly_once(level, before, server_answers(url))
                    results.append(level)
                    progress.console.print(
                        f"{clients:>4} clients: {level['requests_per_s']:.1f} req/s, "
                        f"p99 {level['p99_s']} s, 503 {level['rejected_503']}, lost {level['lost']}"
                    )
                    progress.advance(task)
        finally:
            exit_status = stop_server(proc)
    summary = summarise(results, args, {**meta, "server_exit_status": exit_status})
    summary["machine"] = machine_fingerprint()
    atomic_write_json(args.out, summary)
    if args.trace:
        write_trace(args.trace, spans)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("levels", "settings")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
