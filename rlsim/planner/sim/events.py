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
from typing import Callable, Sequence

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
        t = np.asarray(times, dtype=float)
        s = np.asarray(speeds, dtype=float)
        if t.size == 0 or t.size != s.size or t[0] != 0.0 or np.any(s <= 0):
            raise ValueError("SpeedProfile needs matching times (from 0) and positive speeds")
        self._t = t
        self._w = np.concatenate([[0.0], np.cumsum(np.diff(t) * s[:-1])])
        self._last = float(s[-1])
        self._tl = self._t.tolist()
        self._wl = self._w.tolist()

    @classmethod
    def constant(cls) -> "SpeedProfile":
        return cls([0.0], [1.0])

    @classmethod
    def from_load(cls, starts: np.ndarray, ends: np.ndarray, capacity: int, slowdown: float) -> "SpeedProfile":
        """Speed ``1 / (1 + slowdown x busy / capacity)`` where ``busy`` counts intervals covering t."""
        if slowdown <= 0 or len(starts) == 0:
            return cls.constant()
        times = np.concatenate([starts, ends])
        deltas = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
        order = np.lexsort((deltas, times))  # ends before starts at equal times
        times, busy = times[order], np.cumsum(deltas[order])
        keep = np.append(times[1:] != times[:-1], True)  # the count after the last event at each time
        times, busy = times[keep], busy[keep]
        speeds = 1.0 / (1.0 + slowdown * np.clip(busy, 0, None) / capacity)
        if times[0] > 0:
            times, speeds = np.concatenate([[0.0], times]), np.concatenate([[1.0], speeds])
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
        out = np.interp(flat, self._w, self._t)
        beyond = flat > self._w[-1]
        out[beyond] = self._t[-1] + (flat[beyond] - self._w[-1]) / self._last
        return out
