"""The online dynamic batcher: flush rules, per-request results, bounded queue, shutdown, asyncio.

Timing is never asserted: batches are made deterministic by holding the worker inside a first
"gate" batch while later items queue up behind it. Waits use generous timeouts only so a broken
batcher fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pytest

from rlsim.batching.dynamic import BatcherClosed, DynamicBatcher, QueueFull
from rlsim.errors import RlsimError

WAIT = 30.0  # seconds; only reached when the batcher is broken
GATE = 1000  # the item that holds the worker; its size fills a batch so it flushes at once


class Recorder:
    """A batch function that doubles numbers, records each batch, and can hold the worker."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def __call__(self, items: list[int]) -> list[int]:
        self.entered.set()
        assert self.gate.wait(WAIT)
        self.batches.append(list(items))
        if any(i < 0 for i in items):
            raise ValueError(f"negative item in {items}")
        return [2 * i for i in items]

    def hold(self, batcher: DynamicBatcher[int, int]) -> Future[int]:
        """Occupy the worker with item GATE until ``release``; later items queue behind it."""
        self.gate.clear()
        self.entered.clear()
        first = batcher.submit(GATE)
        assert self.entered.wait(WAIT)
        return first

    def release(self) -> None:
        self.gate.set()


def make(rec: Recorder, **kw: object) -> DynamicBatcher[int, int]:
    settings = dict(max_batch_size=4, max_wait_s=60.0, max_queue=16, size_of=lambda i: GATE if i == GATE else 1)
    settings.update(kw)
    return DynamicBatcher(rec, **settings)  # type: ignore[arg-type]


def test_flushes_when_max_batch_size_is_reached_without_waiting() -> None:
    rec = Recorder()
    # max_wait_s is 60 s: results within WAIT prove the size rule flushed the batches.
    with make(rec) as b:
        futures = [b.submit(i) for i in range(1, 9)]
        assert [f.result(WAIT) for f in futures] == [2 * i for i in range(1, 9)]
    assert all(len(batch) <= 4 for batch in rec.batches)
    assert sorted(i for batch in rec.batches for i in batch) == list(range(1, 9))


def test_flushes_when_oldest_has_waited_max_wait() -> None:
    rec = Recorder()
    with make(rec, max_batch_size=100, max_wait_s=0.01, max_queue=200) as b:
        first = rec.hold(b)
        later = [b.submit(i) for i in (5, 6, 7)]
        rec.release()
        assert first.result(WAIT) == 2 * GATE
        assert [f.result(WAIT) for f in later] == [10, 12, 14]
    # Far below max_batch_size, so only the wait rule can have flushed them, together.
    assert rec.batches == [[GATE], [5, 6, 7]]


def test_each_result_returns_to_its_own_request_across_threads() -> None:
    rec = Recorder()
    got: dict[int, int] = {}
    lock = threading.Lock()

    def client(start: int) -> None:
        for i in range(start, start + 50):
            value = b.submit(i).result(WAIT)
            with lock:
                got[i] = value

    with make(rec, max_batch_size=8, max_wait_s=0.001, max_queue=64) as b:
        threads = [threading.Thread(target=client, args=(1 + k * 100,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
    assert len(got) == 300
    assert all(v == 2 * k for k, v in got.items())


def test_sizes_group_whole_items_and_a_big_item_runs_alone() -> None:
    rec = Recorder()
    with make(rec, size_of=lambda i: i, max_batch_size=5, max_queue=40, max_wait_s=0.01) as b:
        first = rec.hold(b)
        futures = [b.submit(i) for i in (2, 2, 9, 1)]
        rec.release()
        first.result(WAIT)
        assert [f.result(WAIT) for f in futures] == [4, 4, 18, 2]
    # 2+2 fits in 5; 9 alone exceeds it and runs by itself; 1 follows.
    assert rec.batches[1:] == [[2, 2], [9], [1]]


def test_full_queue_raises_queue_full_and_cancel_frees_space() -> None:
    rec = Recorder()
    b = make(rec, max_batch_size=2, max_queue=3, max_wait_s=0.01)
    first = rec.hold(b)
    queued = [b.submit(i) for i in (1, 2, 3)]
    with pytest.raises(QueueFull, match="full") as info:
        b.submit(4)
    assert (info.value.queued, info.value.capacity) == (3, 3)
    assert isinstance(info.value, RlsimError)
    assert queued[1].cancel()
    assert b.queued_size == 2
    extra = b.submit(5)
    rec.release()
    answers = [first.result(WAIT), queued[0].result(WAIT), queued[2].result(WAIT), extra.result(WAIT)]
    assert answers == [2 * GATE, 2, 6, 10]
    assert b.close(WAIT)
    stats = b.stats
    assert (stats.rejected_items, stats.cancelled_items, stats.completed_items) == (1, 1, 4)
    assert all(2 not in batch for batch in rec.batches)


def test_close_finishes_accepted_work_then_refuses_new_work() -> None:
    rec = Recorder()
    b = make(rec, max_batch_size=2)
    first = rec.hold(b)
    queued = [b.submit(i) for i in range(1, 6)]
    closer = threading.Thread(target=b.close)
    closer.start()
    rec.release()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert [f.result(0) for f in [first, *queued]] == [2 * GATE, 2, 4, 6, 8, 10]
    with pytest.raises(BatcherClosed):
        b.submit(7)


def test_close_with_cancel_pending_fails_queued_items() -> None:
    rec = Recorder()
    b = make(rec)
    first = rec.hold(b)
    queued = b.submit(1)
    closer = threading.Thread(target=b.close, kwargs={"cancel_pending": True})
    closer.start()
    with pytest.raises(BatcherClosed):
        queued.result(WAIT)
    rec.release()
    closer.join(WAIT)
    assert first.result(0) == 2 * GATE


def test_a_failing_item_fails_only_its_own_future() -> None:
    rec = Recorder()
    with make(rec, max_wait_s=0.01) as b:
        first = rec.hold(b)
        good, bad, good2 = b.submit(3), b.submit(-1), b.submit(4)
        rec.release()
        first.result(WAIT)
        assert good.result(WAIT) == 6 and good2.result(WAIT) == 8
        with pytest.raises(ValueError, match="negative"):
            bad.result(WAIT)
    assert b.stats.failed_items == 1


def test_wrong_result_count_is_an_error_for_the_callers() -> None:
    with DynamicBatcher(lambda items: [], max_batch_size=2, max_wait_s=0.0, max_queue=4) as b:
        with pytest.raises(RuntimeError, match="0 results for 1 items"):
            b.submit(1).result(WAIT)


def test_asyncio_callers_get_results_and_timeouts_free_queue_space() -> None:
    rec = Recorder()
    b = make(rec, max_batch_size=4, max_wait_s=0.001)

    async def main() -> None:
        values = await asyncio.gather(*(asyncio.wrap_future(b.submit(i)) for i in range(10)))
        assert values == [2 * i for i in range(10)]
        first = rec.hold(b)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.wrap_future(b.submit(99)), timeout=0.01)
        await asyncio.sleep(0)  # let the cancellation reach the concurrent future
        assert b.queued_size == 0
        rec.release()
        assert await asyncio.wrap_future(first) == 2 * GATE

    asyncio.run(main())
    assert b.close(WAIT)
    assert all(99 not in batch for batch in rec.batches)


def test_invalid_settings_list_every_problem() -> None:
    with pytest.raises(RlsimError) as info:
        DynamicBatcher(lambda x: x, max_batch_size=0, max_wait_s=-1.0, max_queue=-1)
    message = str(info.value)
    assert "max_batch_size" in message and "max_wait_s" in message and "max_queue" in message
