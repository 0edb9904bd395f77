"""A minimal discrete-event loop on a heap, and piecewise-constant speed functions.

``EventLoop`` runs callbacks in time order; events at the same time run in the order they were
scheduled (a sequence number breaks ties), so a simulation is deterministic.

``SpeedProfile`` describes a resource whose speed changes over time (1.0 = uncontended; 0.8 =
everything takes 1/0.8 as long). It converts between wall time and "work" (uncontended seconds),
which is how contention is applied without simulating each decode iteration.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

Action = Callable[[float], None]


class EventLoop:
    """Heap of ``(time_s, seq, action)``; ``run`` pops in time order and calls ``action(time_s)``."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Action]] = []
        self._seq = 0
        self.now = 0.0
        self.events_run = 0

    def schedule(self, time_s: float, action: Action) -> None:
        """Run ``action(time_s)`` at ``time_s`` (never before ``now``: time does not go back)."""
        heapq.heappush(self._heap, (max(time_s, self.now), self._seq, action))
        self._seq += 1

    def run(self, until: float = float("inf")) -> float:
        """Process events up to ``until`` seconds; returns the time of the last event run."""
        while self._heap and self._heap[0][0] <= until:
            time_s, _, action = heapq.heappop(self._heap)
            self.now = time_s
            self.events_run += 1
            action(time_s)
        return self.now


class SpeedProfile:
    """Speed ``speeds[i]`` on ``[times[i], times[i+1])``; the last speed holds for ever after.

    ``times`` (k,) ascending from 0, ``speeds`` (k,) in (0, 1]. ``work_at(t)`` is the uncontended
    seconds of work done by wall time ``t``; ``time_at(w)`` is its inverse.
    """

    def __init__(self, times: Sequence[float], speeds: Sequence[float]) -> None:
        # Plain lists: a node's profile has a few to a few hundred breakpoints, where numpy's per-call
        # overhead costs more than the arithmetic (the 1,000-GPU benchmark builds ~100 per step).
        t = [float(x) for x in times]
        v = [float(x) for x in speeds]
        if not t or len(t) != len(v) or t[0] != 0.0 or min(v) <= 0:
            raise ValueError("SpeedProfile needs matching times (from 0) and positive speeds")
        w = [0.0] * len(t)
        for i in range(1, len(t)):
            w[i] = w[i - 1] + (t[i] - t[i - 1]) * v[i - 1]
        self._tl = t
        self._wl = w
        self._last = v[-1]

    @classmethod
    def constant(cls) -> SpeedProfile:
        return cls([0.0], [1.0])

    @classmethod
    def from_ends(cls, ends: Sequence[float], capacity: int, slowdown: float) -> SpeedProfile:
        """``from_load`` for intervals that all start at 0 (engines generating from the step's start)."""
        if slowdown <= 0 or len(ends) == 0:
            return cls.constant()
        per_busy = slowdown / capacity
        times, speeds, busy = [0.0], [1.0 / (1.0 + per_busy * len(ends))], len(ends)
        for end in sorted(ends):
            busy -= 1
            if end == times[-1]:
                speeds[-1] = 1.0 / (1.0 + per_busy * busy)
            else:
                times.append(end)
                speeds.append(1.0 / (1.0 + per_busy * busy))
        return cls(times, speeds)

    @classmethod
    def from_load(cls, starts: Sequence[float], ends: Sequence[float], capacity: int, slowdown: float) -> SpeedProfile:
        """Speed ``1 / (1 + slowdown x busy / capacity)`` where ``busy`` counts intervals covering t."""
        if slowdown <= 0 or len(starts) == 0:
            return cls.constant()
        # Ends sort before starts at equal times (-1 < +1), and the count after the last event at a
        # time is the one that holds from it on.
        events = sorted([(x, 1) for x in starts] + [(x, -1) for x in ends])
        per_busy = slowdown / capacity
        times: list[float] = []
        speeds: list[float] = []
        busy = 0
        # A count is negative only between events at one time (a zero-length interval's end sorted
        # before its start); the last event at that time overwrites it, so no clamp is needed.
        for time_s, delta in events:
            busy += delta
            speed = 1.0 / (1.0 + per_busy * busy)
            if times and times[-1] == time_s:
                speeds[-1] = speed
            else:
                times.append(time_s)
                speeds.append(speed)
        if times[0] > 0:
            times.insert(0, 0.0)
            speeds.insert(0, 1.0)
        return cls(times, speeds)

    @staticmethod
    def _interp(x: float, xs: list[float], ys: list[float], slope: float) -> float:
        """Piecewise-linear ``xs -> ys``, continued with ``slope`` past the last point."""
        if x >= xs[-1]:
            return ys[-1] + (x - xs[-1]) * slope
        i = bisect_right(xs, x) - 1
        return ys[i] + (ys[i + 1] - ys[i]) * (x - xs[i]) / (xs[i + 1] - xs[i])

    def work_at(self, time_s: float) -> float:
        return self._interp(time_s, self._tl, self._wl, self._last)

    def time_at(self, work_s: float) -> float:
        return self._interp(work_s, self._wl, self._tl, 1.0 / self._last)

    def end_time(self, start_s: float, work_s: float) -> float:
        """Wall time at which ``work_s`` uncontended seconds started at ``start_s`` finish."""
        return self.time_at(self.work_at(start_s) + work_s)

    def times_at(self, work: np.ndarray) -> np.ndarray:
        """Vectorised ``time_at`` for an array of work amounts (any shape)."""
        flat = np.asarray(work, dtype=float)
        if len(self._tl) == 1:  # constant speed from 0
            return flat / self._last
        out = np.interp(flat, self._wl, self._tl)
        beyond = flat > self._wl[-1]
        out[beyond] = self._tl[-1] + (flat[beyond] - self._wl[-1]) / self._last
        return out
