"""How PPO's roles share two cores: the critic's values call beside other processes, and ORT's spinning.

The critic's values call (tiny-llama backbone, torch, 2 threads, one micro-batch of 16 x 192 tokens), timed in
its own process pinned to cores {0, 1} for 6 s at a time, in rounds that interleave the conditions:

- ``alone``; beside one other 2-thread critic doing the same (``k2 critic``) or two (``k3 critics``): what the
  profile's ``sharing_efficiency`` (two critic updates, larger calls) stands for, at PPO's call size;
- beside the ORT reference (2 threads) with ONNX Runtime's thread spinning on or off (``session.intra_op.
  allow_spinning``), alone or with one more critic.

Fair sharing of 2 cores would give 1/2 of the alone rate beside one process and 1/3 beside two. Writes
``benchmarks/results/roles_core_sharing.json`` (the machine's fingerprint, the date, the command; ``--out``
elsewhere) with each condition's calls/s per round.

    .venv/bin/python benchmarks/roles_core_sharing.py --rounds 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlsim.fingerprint import machine_fingerprint  # noqa: E402
from rlsim.io import atomic_write_json  # noqa: E402


def load():
    from rlsim.models import resolve_policy

    p = resolve_policy("tiny-llama")
    return p, json.loads((p / "config.json").read_text())["vocab_size"]


def _serve(call, timed, start, stop, out):
    """Warm ``call`` up, say ready, then per signal on ``start``: time it for 6 s and report calls/s (``timed``),
    or run it until ``start`` is cleared; ``stop`` ends the process."""
    call()
    out.put("ready")
    while True:
        start.wait()
        if stop.is_set():
            return
        if timed:
            t0, calls = time.perf_counter(), 0
            while time.perf_counter() - t0 < 6:
                call()
                calls += 1
            out.put(calls / (time.perf_counter() - t0))
            start.clear()
        else:
            while start.is_set() and not stop.is_set():
                call()


def critic_worker(timed, start, stop, out):
    os.sched_setaffinity(0, {0, 1})
    from rlsim.loop.roles.critic import CriticModel, CriticSettings
    from rlsim.planner.measure.roles import synthetic_rollouts

    p, vocab = load()
    critic = CriticModel(p, CriticSettings(threads=2, micro_batch=16))
    rollouts = synthetic_rollouts(16, 32, 160, vocab)
    _serve(lambda: critic.values(rollouts), timed, start, stop, out)


def ref_worker(spin, start, stop, out):
    os.sched_setaffinity(0, {0, 1})
    from rlsim.loop.roles.reference import OrtReference, ReferenceSettings
    from rlsim.planner.measure.roles import synthetic_rollouts

    p, vocab = load()
    reference = OrtReference(p, ReferenceSettings("ort", 16, "cpu", 2, spinning=spin))
    rollouts = synthetic_rollouts(16, 32, 160, vocab, salt=1)
    _serve(lambda: reference.logprobs(rollouts), False, start, stop, out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds over every condition")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "roles_core_sharing.json")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        print("--rounds: give 1 or more", file=sys.stderr)
        return 2
    if not {0, 1} <= os.sched_getaffinity(0):
        print("needs cores 0 and 1", file=sys.stderr)
        return 2
    ctx = mp.get_context("spawn")
    out, stop = ctx.Queue(), ctx.Event()
    go = {name: ctx.Event() for name in ("timed", "c2", "c3", "spin", "nospin")}
    procs = [
        ctx.Process(target=critic_worker, args=(True, go["timed"], stop, out)),
        ctx.Process(target=critic_worker, args=(False, go["c2"], stop, out)),
        ctx.Process(target=critic_worker, args=(False, go["c3"], stop, out)),
        ctx.Process(target=ref_worker, args=(True, go["spin"], stop, out)),
        ctx.Process(target=ref_worker, args=(False, go["nospin"], stop, out)),
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            assert out.get(timeout=600) == "ready"
        conds = {"alone": [], "k2 critic": ["c2"], "k3 critics": ["c2", "c3"], "+ort spin": ["spin"],
                 "+ort nospin": ["nospin"], "k3 critic+ort spin": ["c2", "spin"],
                 "k3 critic+ort nospin": ["c2", "nospin"]}  # fmt: skip
        res: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, others in conds.items():
                for o in others:
                    go[o].set()
                time.sleep(0.5)
                go["timed"].set()
                rate = out.get(timeout=120)
                for o in others:
                    go[o].clear()
                time.sleep(0.5)
                res.setdefault(name, []).append(rate)
                print(f"{name:24s} {rate:.2f} calls/s", flush=True)
    finally:
        stop.set()
        for e in go.values():
            e.set()
        for p in procs:
            p.join(30)
            p.kill()
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/roles_core_sharing.py " + " ".join(argv),
        "machine": machine_fingerprint(),
        "calls_per_s": {k: [round(x, 3) for x in v] for k, v in res.items()},
    }
    atomic_write_json(args.out, result)
    print(json.dumps(result["calls_per_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
