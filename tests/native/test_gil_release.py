"""run() releases the GIL around ONNX Runtime's Run, so Python threads proceed and runs overlap.

No timing thresholds: ``engine.active_runs`` counts calls inside Run. Reading it is Python code,
which needs the GIL, so a thread can only ever see a run in flight (or two at once) if the thread
doing that run let go of the GIL. Each loop ends when the runs end, never on a clock.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.native_graphs import random_batch

pytestmark = pytest.mark.native

MAX_RUNS = 50  # per worker; the loops stop as soon as the overlap is seen, long before this


@pytest.fixture(scope="module")
def engine(native: Any, tiny_bert: Path, ort_library: Path) -> Any:
    # One intra-op thread: each Run then works on its calling thread, so two runs need two threads.
    return native.Engine(tiny_bert, ort_library, intra_op_threads=1, spinning=False)


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray]:
    return random_batch(32, 128, seed=42)  # tens of milliseconds per run on this model


def run_until(engine: Any, batch: tuple, stop: threading.Event, results: list) -> None:
    for _ in range(MAX_RUNS):
        results.append(engine.run(*batch))
        if stop.is_set():
            return


def test_python_code_runs_while_a_run_is_in_flight(engine: Any, batch: tuple) -> None:
    stop = threading.Event()
    results: list[np.ndarray] = []
    worker = threading.Thread(target=run_until, args=(engine, batch, stop, results))
    worker.start()
    seen_in_flight = 0
    while worker.is_alive():
        if engine.active_runs == 1:  # this line runs while the worker is inside Run
            seen_in_flight += 1
            stop.set()
    worker.join()
    assert seen_in_flight > 0
    assert engine.active_runs == 0
    np.testing.assert_array_equal(results[0], results[-1])


def test_two_threads_are_inside_run_at_once(engine: Any, batch: tuple) -> None:
    stop = threading.Event()
    results: list[list[np.ndarray]] = [[], []]
    workers = [threading.Thread(target=run_until, args=(engine, batch, stop, r)) for r in results]
    for w in workers:
        w.start()
    most = 0
    while any(w.is_alive() for w in workers):
        most = max(most, engine.active_runs)
        if most == 2:
            stop.set()
    for w in workers:
        w.join()
    assert most == 2
    # Concurrent runs share one session: each must still get its own, correct rewards.
    reference = engine.run(*batch)
    for r in results:
        assert r and all(np.array_equal(x, reference) for x in r)


def test_concurrent_runs_of_different_shapes_get_their_own_results(engine: Any) -> None:
    batches = [random_batch(b, s, seed=b * s) for b, s in [(3, 100), (17, 40), (1, 128), (8, 7)]]
    expected = [engine.run(*b) for b in batches]
    got: list[Any] = [None] * len(batches)

    def score(i: int) -> None:
        got[i] = [engine.run(*batches[i]) for _ in range(5)]

    threads = [threading.Thread(target=score, args=(i,)) for i in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for exp, runs in zip(expected, got, strict=True):
        assert all(np.array_equal(exp, r) for r in runs)
