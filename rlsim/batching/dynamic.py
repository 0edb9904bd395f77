"""An online dynamic batcher (Triton style): requests arrive over time and are scored together.

Each ``submit(item)`` returns a ``concurrent.futures.Future`` for that item's own result. One worker
thread forms batches of whole items and calls ``process(items) -> results`` with them, flushing when

- the queued items add up to ``max_batch_size`` (sizes from ``size_of``, e.g. texts per request), or
- the oldest queued item has waited ``max_wait_s`` seconds, or
- the batcher is closing (accepted work is finished, not dropped).

An item larger than ``max_batch_size`` runs alone in its own batch: items are never split, so one
item is always one ``process`` call's worth of work. The queue is bounded (``max_queue``, in the same
size units): ``submit`` raises ``QueueFull`` instead of letting latency grow without bound.

It is thread-safe and loop-agnostic: plain threads call ``future.result(timeout)``; asyncio code
awaits ``asyncio.wrap_future(future)`` (cancelling that await cancels a still-queued item and frees
its queue space). ``process`` runs in the worker thread, so an event loop keeps answering meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, TypeVar

from rlsim.batching.base import Batcher, BatcherInfo, batcher_names, register_batcher
from rlsim.errors import RlsimError

T = TypeVar("T")
R = TypeVar("R")


class QueueFull(RlsimError):
    """The batcher's queue cannot take the item now; retry later (or raise ``max_queue``)."""

    def __init__(self, queued: int, size: int, capacity: int) -> None:
        self.queued, self.size, self.capacity = queued, size, capacity
        super().__init__(
            f"batcher queue is full ({queued} of {capacity} queued, item of size {size}); "
            "retry after a short wait, or raise max_queue"
        )


class BatcherClosed(RlsimError):
    """``submit`` after ``close()``: the batcher no longer accepts work."""


@dataclass
class BatcherStats:
    """Counters since start. Sizes are in ``size_of`` units (e.g. sequences); ``*_items`` count items."""

    submitted_items: int = 0
    rejected_items: int = 0
    cancelled_items: int = 0
    failed_items: int = 0
    completed_items: int = 0
    batches: int = 0
    batched_size: int = 0
    busy_s: float = 0.0
    batch_sizes: dict[int, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__, batch_sizes=dict(self.batch_sizes))


@dataclass(eq=False)  # identity equality: deque.remove must never compare user items
class _Pending(Generic[T, R]):
    item: T
    size: int
    enqueued: float
    future: Future[R]


@register_batcher("dynamic", BatcherInfo(sizing="size", online=True))
class DynamicBatcher(Generic[T, R]):
    """Collects items submitted over time into batches for one ``process`` function.

    ``process(items)`` must return one result per item, in order; it is called from one worker
    thread only, so it need not be thread-safe. If it raises for a batch of several items, each item
    is retried alone (``isolate_failures``) so one bad item fails only its own future.
    ``on_batch(size, seconds)`` is called after every batch (for metrics).
    """

    @classmethod
    def from_settings(cls, size: int | None = None, budget: int | None = None) -> Batcher:
        """The registry's offline constructor: refused, since this batcher needs a ``process`` function."""
        raise RlsimError(
            "the dynamic batcher is online (requests arrive over time; `rlsim serve` uses it): it cannot plan a "
            f"known set of texts; use one of {', '.join(batcher_names())} here"
        )

    def __init__(
        self,
        process: Callable[[list[T]], Sequence[R]],
        *,
        max_batch_size: int,
        max_wait_s: float,
        max_queue: int,
        size_of: Callable[[T], int] | None = None,
        isolate_failures: bool = True,
        on_batch: Callable[[int, float], None] | None = None,
        name: str = "dynamic-batcher",
    ) -> None:
        problems = []
        if max_batch_size < 1:
            problems.append(f"max_batch_size must be >= 1 (got {max_batch_size})")
        if max_wait_s < 0:
            problems.append(f"max_wait_s must be >= 0 seconds (got {max_wait_s})")
        if max_queue < max_batch_size:
            problems.append(f"max_queue ({max_queue}) must be >= max_batch_size ({max_batch_size})")
        if problems:
            raise RlsimError("invalid dynamic batcher settings: " + "; ".join(problems))
        self.max_batch_size, self.max_wait_s, self.max_queue = max_batch_size, max_wait_s, max_queue
        self._process = process
        self._size_of = size_of or (lambda _item: 1)
        self._isolate = isolate_failures
        self._on_batch = on_batch
        self._cond = threading.Condition()
        self._queue: deque[_Pending[T, R]] = deque()
        self._queued_size = 0
        self._closing = False
        self._stats = BatcherStats()
        self._worker = threading.Thread(target=self._run, name=name, daemon=True)
        self._worker.start()

    # ---- producer side -------------------------------------------------------------------------
    def submit(self, item: T) -> Future[R]:
        """Queue ``item``; returns its future. Raises ``QueueFull`` or ``BatcherClosed``, never blocks."""
        size = int(self._size_of(item))
        future: Future[R] = Future()
        with self._cond:
            if self._closing:
                raise BatcherClosed("the batcher is shut down and accepts no new work; create a new one")
            # An item bigger than the whole queue could never fit: admit it into an empty queue
            # rather than rejecting it forever.
            if self._queue and self._queued_size + size > self.max_queue:
                self._stats.rejected_items += 1
                raise QueueFull(self._queued_size, size, self.max_queue)
            pending = _Pending(item, size, time.monotonic(), future)
            self._queue.append(pending)
            self._queued_size += size
            self._stats.submitted_items += 1
            self._cond.notify_all()
        future.add_done_callback(partial(self._forget_if_cancelled, pending=pending))
        return future

    def _forget_if_cancelled(self, future: Future[R], pending: _Pending[T, R]) -> None:
        # A caller that gave up (timeout) frees its queue space at once, so abandoned work neither
        # runs nor counts against the bound.
        if not future.cancelled():
            return
        with self._cond:
            try:
                self._queue.remove(pending)
            except ValueError:
                return  # already taken by the worker
            self._queued_size -= pending.size
            self._stats.cancelled_items += 1

    @property
    def queued_size(self) -> int:
        """Queued work in ``size_of`` units (e.g. sequences), not counting the batch running now."""
        return self._queued_size

    @property
    def queued_items(self) -> int:
        return len(self._queue)

    @property
    def stats(self) -> BatcherStats:
        with self._cond:
            return BatcherStats(**self._stats.as_dict())  # type: ignore[arg-type]

    # ---- shutdown ------------------------------------------------------------------------------
    def close(self, timeout_s: float | None = None, cancel_pending: bool = False) -> bool:
        """Stop accepting work and finish what was accepted (or fail it if ``cancel_pending``).

        Returns True when the worker finished within ``timeout_s`` seconds (None: wait for it).
        """
        with self._cond:
            self._closing = True
            dropped = list(self._queue) if cancel_pending else []
            if cancel_pending:
                self._queue.clear()
                self._queued_size = 0
            self._cond.notify_all()
        for pending in dropped:
            if pending.future.set_running_or_notify_cancel():
                pending.future.set_exception(BatcherClosed("the batcher was shut down before this item ran"))
        self._worker.join(timeout_s)
        return not self._worker.is_alive()

    def __enter__(self) -> DynamicBatcher[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- worker side ---------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._execute(batch)
            except BaseException as err:  # noqa: BLE001 - a dead worker would hang every caller
                self._fail([p for p in batch if not p.future.done()], RuntimeError(f"batcher failed: {err!r}"))

    def _next_batch(self) -> list[_Pending[T, R]] | None:
        """Block until a batch is due; None once closing and drained."""
        with self._cond:
            while True:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return None
                deadline = self._queue[0].enqueued + self.max_wait_s
                while self._queue and self._queued_size < self.max_batch_size and not self._closing:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                batch = self._take()
                if batch:
                    return batch

    def _take(self) -> list[_Pending[T, R]]:
        """Pop whole items up to ``max_batch_size`` (at least one); skip ones cancelled meanwhile."""
        batch: list[_Pending[T, R]] = []
        total = 0
        while self._queue and (not batch or total + self._queue[0].size <= self.max_batch_size):
            pending = self._queue.popleft()
            self._queued_size -= pending.size
            if pending.future.set_running_or_notify_cancel():
                batch.append(pending)
                total += pending.size
            else:
                self._stats.cancelled_items += 1
        return batch

    def _execute(self, batch: list[_Pending[T, R]]) -> None:
        size = sum(p.size for p in batch)
        t0 = time.perf_counter()
        try:
            results = self._call([p.item for p in batch])
        except Exception as err:  # noqa: BLE001 - delivered to the callers, never lost
            if self._isolate and len(batch) > 1:
                for pending in batch:
                    self._execute_alone(pending)
            else:
                self._fail(batch, err)
        else:
            for pending, result in zip(batch, results, strict=True):
                pending.future.set_result(result)
            self._count(batch, size, time.perf_counter() - t0)

    def _execute_alone(self, pending: _Pending[T, R]) -> None:
        t0 = time.perf_counter()
        try:
            (result,) = self._call([pending.item])
        except Exception as err:  # noqa: BLE001
            self._fail([pending], err)
        else:
            pending.future.set_result(result)
            self._count([pending], pending.size, time.perf_counter() - t0)

    def _call(self, items: list[T]) -> Sequence[R]:
        results = self._process(items)
        if len(results) != len(items):
            raise RuntimeError(f"batch function returned {len(results)} results for {len(items)} items")
        return results

    def _fail(self, batch: list[_Pending[T, R]], err: Exception) -> None:
        with self._cond:
            self._stats.failed_items += len(batch)
        for pending in batch:
            pending.future.set_exception(err)

    def _count(self, batch: list[_Pending[T, R]], size: int, seconds: float) -> None:
        with self._cond:
            s = self._stats
            s.completed_items += len(batch)
            s.batches += 1
            s.batched_size += size
            s.busy_s += seconds
            s.batch_sizes[size] = s.batch_sizes.get(size, 0) + 1
        if self._on_batch is not None:
            try:
                self._on_batch(size, seconds)
            except Exception:  # noqa: BLE001 - metrics must never break scoring
                pass
