"""What calling a remote reward needs, apart from HTTP itself: a limit on requests in flight, a limit on
requests started per minute, and backoff between retries (settings: ``reward.http``,
``rlsim.rewards.options.RemoteOptions``; used by ``rlsim.scoring.http_scorer``).

The rate limit spaces request starts evenly, ``60 / requests_per_minute`` seconds apart, with no burst: a
server that allows N a minute is never sent more than N in any minute, and the limit costs nothing while
requests come slower than that.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class Pacer:
    """``slot()`` holds one of ``concurrency`` places for a request, started no sooner than the rate allows.

    Thread-safe: one pacer per scorer, shared by the threads that send its requests."""

    def __init__(self, concurrency: int, requests_per_minute: float | None) -> None:
        if concurrency < 1 or (requests_per_minute is not None and requests_per_minute <= 0):
            raise ValueError(f"concurrency >= 1 and requests_per_minute > 0 (got {concurrency}, {requests_per_minute})")
        self._places = threading.BoundedSemaphore(concurrency)
        self._interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._lock = threading.Lock()
        self._next_start = 0.0  # monotonic time the next request may start
        self.waited_s = 0.0  # time requests spent held back by the rate limit, summed

    @contextmanager
    def slot(self) -> Iterator[None]:
        with self._places:
            if self._interval:
                with self._lock:
                    now = time.monotonic()
                    start = max(now, self._next_start)
                    self._next_start = start + self._interval
                    self.waited_s += start - now
                time.sleep(start - now)
            yield


def backoff_delay(attempt: int, backoff_s: tuple[float, float], retry_after_s: float = 0.0) -> float:
    """Seconds to wait before retry ``attempt`` (0 for the first retry): ``first * 2**attempt`` up to
    ``longest``, or the server's Retry-After when it asks for longer (also capped at ``longest``)."""
    first, longest = backoff_s
    return max(min(longest, first * 2**attempt), min(retry_after_s, longest))


def requests_of(rows: Sequence[T], request_size: int | None, concurrency: int, max_rows: int) -> list[Sequence[T]]:
    """``rows`` cut into the requests one batch is sent as: ``request_size`` rows each (None: ``concurrency``
    requests whose sizes differ by at most one), never more than ``max_rows`` (the server's limit) in one."""
    n = len(rows)
    if n == 0:
        return []
    if request_size is None:
        parts = min(concurrency, n)
        bounds = [round(i * n / parts) for i in range(parts + 1)]
        pieces = [rows[bounds[i] : bounds[i + 1]] for i in range(parts)]
    else:
        pieces = [rows[i : i + request_size] for i in range(0, n, request_size)]
    return [p[i : i + max_rows] for p in pieces for i in range(0, len(p), max_rows)]
