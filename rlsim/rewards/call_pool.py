"""A pool of worker processes that call one Python function, each call with a wall-clock deadline.

``concurrent.futures`` and ``multiprocessing.Pool`` cannot stop one call that runs too long, which is the thing a
reward function (a verifier stuck on a pathological answer) needs most. Here each worker is a plain subprocess
(``python -m rlsim.rewards.call_worker MODULE:FUNCTION``) holding one call at a time; a call past its deadline
kills its worker, which is replaced, and the call's outcome is ``timeout``. A worker that dies mid-call (a crash,
``os._exit``) gives ``error`` and is replaced too. Nothing waits longer than the deadline, so no step hangs.

Workers inherit the caller's CPU affinity (the scoring actor's pinned cores) and run with one BLAS/OpenMP thread:
the pool is the parallelism. Frameworks run rule-based verifiers the same way, in a pool of processes next to the
trainer (verl ``verl/experimental/reward_loop/reward_manager``: ``reward.num_workers``; NeMo-RL
``nemo_rl/environments/math_environment.py``: ``env.math.num_workers`` Ray workers).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rlsim.errors import RlsimError

START_TIMEOUT_S = 120.0  # a worker must import the function within this (a cold import of sympy takes ~2 s)


@dataclass(frozen=True)
class CallOutcome:
    """One call: ``status`` ok (``value`` set), ``timeout`` (past the deadline, worker killed) or ``error``."""

    status: Literal["ok", "timeout", "error"]
    value: float | None = None
    detail: str = ""
    seconds: float = 0.0


class _Worker:
    def __init__(self, target: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlsim.rewards.call_worker", target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self.job: int | None = None
        self.started = 0.0

    def fileno(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, index: int, args: Sequence[object]) -> None:
        assert self.proc.stdin is not None
        self.job, self.started = index, time.monotonic()
        self.proc.stdin.write(json.dumps({"i": index, "args": list(args)}) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict | None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()  # reaped, so its CPU time counts in the owner's children time
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class CallPool:
    """``workers`` processes calling ``target`` (``module:function``); ``map`` runs calls with ``timeout_s`` each."""

    def __init__(self, target: str, workers: int, timeout_s: float) -> None:
        if workers < 1 or timeout_s <= 0:
            raise ValueError(f"a call pool needs workers >= 1 and timeout_s > 0 (got {workers}, {timeout_s})")
        self.target, self.timeout_s = target, timeout_s
        self._env = _worker_env()
        self._workers = [self._start() for _ in range(workers)]
        self.replaced = 0  # workers killed at a deadline or found dead, and started again

    def _start(self) -> _Worker:
        worker = _Worker(self.target, self._env)
        ready, _, _ = select.select([worker], [], [], START_TIMEOUT_S)
        hello = worker.read() if ready else None
        if not hello or not hello.get("ready"):
            worker.kill()
            why = hello.get("error") if hello else f"no answer within {START_TIMEOUT_S:g} s"
            raise RlsimError(f"the reward function's worker could not start: {why}")
        return worker

    def map(self, calls: Sequence[Sequence[object]]) -> list[CallOutcome]:
        """Each call's outcome, in input order; returns within about ``timeout_s`` x calls / workers."""
        outcomes: list[CallOutcome | None] = [None] * len(calls)
        queue = deque(range(len(calls)))
        while True:
            for w in self._workers:
                if w.job is None and queue:
                    index = queue.popleft()
                    w.send(index, calls[index])
            busy = [w for w in self._workers if w.job is not None]
            if not busy:
                break
            now = time.monotonic()
            wait_s = max(0.0, min(w.started + self.timeout_s for w in busy) - now)
            ready, _, _ = select.select(busy, [], [], wait_s)
            for w in ready:
                self._collect(w, outcomes)
            now = time.monotonic()
            for w in busy:
                if w.job is not None and now - w.started >= self.timeout_s:
                    outcomes[w.job] = CallOutcome("timeout", detail=f"no answer within {self.timeout_s:g} s",
                                                  seconds=now - w.started)  # fmt: skip
                    self._replace(w)
        assert all(o is not None for o in outcomes)
        return outcomes  # type: ignore[return-value]

    def _collect(self, w: _Worker, outcomes: list[CallOutcome | None]) -> None:
        assert w.job is not None
        seconds = time.monotonic() - w.started
        answer = w.read()
        if answer is None:  # the worker died mid-call
            code = w.proc.wait()
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            outcomes[w.job] = CallOutcome("error", detail=f"the worker exited mid-call ({how})", seconds=seconds)
            self._replace(w)
        elif "error" in answer:
            outcomes[w.job] = CallOutcome("error", detail=answer["error"], seconds=seconds)
            w.job = None
        else:
            outcomes[w.job] = CallOutcome("ok", value=float(answer["value"]), seconds=seconds)
            w.job = None

    def _replace(self, w: _Worker) -> None:
        w.job = None
        w.kill()
        self._workers[self._workers.index(w)] = self._start()
        self.replaced += 1

    def close(self) -> None:
        for w in self._workers:
            w.kill()
        self._workers = []


def _worker_env() -> dict[str, str]:
    """The caller's environment, with its import path (a user module importable here is importable there) and
    one thread per BLAS/OpenMP library."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env
