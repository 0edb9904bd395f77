"""Scorer replicas fed by a batcher, as a discrete-event simulation (a heap of replica free times).

Finished rollouts join one queue in arrival order; whenever a replica is free it takes the next
batch the batcher will release (a pull model, like a pool of Ray actors handing work to whichever
is idle). The batchers follow ``rlsim.batching``:

- ``fixed``: the next ``batch_size`` arrivals, released when the last of them arrives;
- ``sorted`` / ``token-budget``: a window of arrivals is sorted by length and cut into batches of
  ``batch_size`` / by ``token_budget`` (longest x count), released when the window is full;
- ``dynamic``: released when ``batch_size`` have arrived or the oldest waited ``max_wait_s``; a
  batch keeps growing while every replica is busy.

When generation has finished (or in the sequential schedule, where scoring starts after it) every
pending rollout is released at once. One event per batch, so scoring costs O(batches).

``simulate_round_robin`` models rlsim's own loop instead (``rlsim.loop.schedules.step``): finished
rollouts leave the generator in micro-batches (``window`` of them), each micro-batch goes to the replica with
the fewest calls unfinished when it is released (ties: fewest sent, then the lowest index:
``rlsim.replica_router``, round robin when calls finish before the next is sent), and each replica works through
its calls in order, batching each call with its batcher; the sequential schedule gives each replica one
contiguous slice of the step.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlsim.planner.sim.events import SpeedProfile
from rlsim.planner.spec.cluster import BatcherSpec
from rlsim.replica_router import least_outstanding

LatencyFn = Callable[[int, int], float]  # (sequences, padded tokens) -> uncontended seconds
Batch = np.ndarray | slice  # rollout indices of one batch (a slice when they are contiguous)


def batch_shape(batch: Batch, tokens: list[int], token_array: np.ndarray) -> tuple[int, int]:
    """``(sequences, longest)`` of a batch; a slice is read from the plain list (cheaper)."""
    if isinstance(batch, slice):
        return batch.stop - batch.start, max(tokens[batch])
    return len(batch), int(token_array[batch].max())


@dataclass
class ScoringOutcome:
    """Per replica busy intervals and totals; ``done_s`` is when the last reward is known."""

    done_s: float
    batches: int
    padded_tokens: int
    real_tokens: int
    busy_starts: list[list[float]]
    busy_ends: list[list[float]]
    reward_s: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def empty(cls, replicas: int, rollouts: int, real_tokens: int, start_s: float) -> ScoringOutcome:
        return cls(
            done_s=start_s,
            batches=0,
            padded_tokens=0,
            real_tokens=real_tokens,
            busy_starts=[[] for _ in range(replicas)],
            busy_ends=[[] for _ in range(replicas)],
            reward_s=np.zeros(rollouts),
        )

    def record(self, replica: int, begin: float, end: float, rollouts: np.ndarray | slice, padded: int) -> None:
        """One batch of ``rollouts`` (indices) scored on ``replica`` from ``begin`` to ``end`` seconds."""
        self.batches += 1
        self.padded_tokens += padded
        self.busy_starts[replica].append(begin)
        self.busy_ends[replica].append(end)
        self.reward_s[rollouts] = end
        self.done_s = max(self.done_s, end)

    def busy_s(self) -> float:
        return float(
            sum(
                e - s
                for ss, es in zip(self.busy_starts, self.busy_ends, strict=True)
                for s, e in zip(ss, es, strict=True)
            )
        )


class BatchSource:
    """Releases batches of rollout indices from an arrival stream according to ``spec``.

    ``arrive`` (n,) seconds, ascending; ``tokens`` (n,) scoring tokens per rollout; ``closed_s``:
    when the stream ends (last arrival), after which everything pending is released.
    """

    def __init__(self, arrive: np.ndarray, tokens: np.ndarray, spec: BatcherSpec, closed_s: float) -> None:
        self._arrive = arrive
        self._tokens = tokens
        # Python lists for the per-batch look-ups: numpy's call overhead dominates at one batch a call.
        self._arrive_list: list[float] = arrive.tolist()
        self._spec = spec
        self._closed = closed_s
        self._n = len(arrive)
        self._cur = 0
        self._ready: deque[tuple[Batch, float]] = deque()

    def take(self, now: float) -> tuple[Batch, float] | None:
        """The next batch for a replica free at ``now``: ``(indices, release_s)``; None when done.
        ``indices``: an index array, or a slice for the contiguous batches of fixed and dynamic."""
        if self._ready:
            return self._ready.popleft()
        if self._cur >= self._n:
            return None
        kind = self._spec.kind
        if kind == "fixed":
            return self._take_fixed()
        if kind == "dynamic":
            return self._take_dynamic(now)
        self._fill_window()
        return self._ready.popleft()

    def _release(self, last: int) -> float:
        """Release time of a batch whose last member is index ``last - 1``."""
        return self._closed if last >= self._n else self._arrive_list[last - 1]

    def _take_fixed(self) -> tuple[Batch, float]:
        size = self._spec.batch_size or 1
        lo, hi = self._cur, min(self._cur + size, self._n)
        self._cur = hi
        return slice(lo, hi), self._release(hi)

    def _take_dynamic(self, now: float) -> tuple[Batch, float]:
        size = self._spec.batch_size or 1
        lo = self._cur
        full_at = self._release(min(lo + size, self._n))
        release = max(now, min(full_at, self._arrive_list[lo] + self._spec.max_wait_s, self._closed))
        # Everything that has arrived by the release joins, up to the maximum size.
        hi = min(lo + size, bisect_right(self._arrive_list, release))
        hi = max(hi, lo + 1)
        self._cur = hi
        return slice(lo, hi), release

    def _fill_window(self) -> None:
        lo, hi = self._cur, min(self._cur + self._spec.window, self._n)
        self._cur = hi
        release = self._release(hi)
        window = np.arange(lo, hi)
        # Stable sort: equal lengths keep arrival order, as rlsim.batching.length_order does.
        window = window[np.argsort(self._tokens[window], kind="stable")]
        for batch in split_sorted(window, self._tokens, self._spec):
            self._ready.append((batch, release))


def split_call(items: np.ndarray, tokens: np.ndarray, spec: BatcherSpec) -> list[np.ndarray]:
    """Batches of one scorer call: ``fixed``/``dynamic`` keep the call's order, the others sort first."""
    if spec.kind in ("fixed", "dynamic"):
        size = spec.batch_size or 1
        return [items[i : i + size] for i in range(0, len(items), size)]
    return split_sorted(items[np.argsort(tokens[items], kind="stable")], tokens, spec)


def split_sorted(order: np.ndarray, tokens: np.ndarray, spec: BatcherSpec) -> list[np.ndarray]:
    """Cut length-sorted indices into batches: ``batch_size`` each, or by ``token_budget``.

    Token budget: add the next (longest so far) rollout while ``(count + 1) x its length <=
    budget``; a rollout longer than the budget travels alone.
    """
    if spec.kind != "token-budget":
        size = spec.batch_size or 1
        return [order[i : i + size] for i in range(0, len(order), size)]
    budget = spec.token_budget or 1
    lengths = tokens[order]
    batches, i, n = [], 0, len(order)
    while i < n:
        # With ascending lengths, count x longest grows with each added item: find the last fit.
        cap = max(1, budget // max(int(lengths[i]), 1))
        j_max = min(n, i + cap)
        counts = np.arange(1, j_max - i + 1)
        fits = counts * lengths[i:j_max] <= budget
        take = max(1, int(np.argmin(fits)) if not fits.all() else len(counts))
        batches.append(order[i : i + take])
        i += take
    return batches


def simulate_scoring(
    arrive: np.ndarray,
    tokens: np.ndarray,
    spec: BatcherSpec,
    replicas: int,
    latency: LatencyFn,
    noise: np.ndarray,
    speeds: list[SpeedProfile] | None = None,
    replica_node: Callable[[int], int] = lambda r: 0,
    start_s: float = 0.0,
    pads: bool = True,
) -> ScoringOutcome:
    """Score rollouts arriving at ``arrive`` (seconds, any order) on ``replicas`` identical replicas.

    ``noise`` (>= batches expected, cycled): multipliers on each batch's latency. ``speeds``: per
    node scoring speed over time (contention), indexed by ``replica_node(r)``; None: uncontended.
    ``start_s``: when the replicas start (the sequential schedule starts them after generation).
    ``pads``: a batch costs count x longest tokens; False: its real tokens (a runtime that schedules rows
    itself, ``ScorerLatencyModel.pads``).
    """
    order = np.argsort(arrive, kind="stable")
    arr, tok = arrive[order], tokens[order]
    closed = float(arr[-1]) if len(arr) else start_s
    source = BatchSource(arr, tok, spec, closed)
    out = ScoringOutcome.empty(replicas, len(arr), int(tok.sum()), start_s)
    tok_list, noise_list = tok.tolist(), noise.tolist()
    node_speed = [speeds[replica_node(r)] for r in range(replicas)] if speeds else None
    # The event loop of a pull pool, inlined: replicas free up in time order (ties: the one scheduled
    # first, as EventLoop orders them) and each takes the next batch. One heap entry per batch.
    free = [(start_s, r, r) for r in range(replicas)]
    seq = replicas
    while free:
        now, _, replica = heapq.heappop(free)
        got = source.take(now)
        if got is None:
            continue
        idx, release = got
        begin = now if now > release else release
        count, longest = batch_shape(idx, tok_list, tok)
        padded = count * longest if pads else int(tok[idx].sum())
        work = latency(count, padded) * noise_list[out.batches % len(noise_list)]
        end = node_speed[replica].end_time(begin, work) if node_speed else begin + work
        out.record(replica, begin, end, idx, padded)
        heapq.heappush(free, (end, seq, replica))
        seq += 1
    rewards = np.empty_like(out.reward_s)
    rewards[order] = out.reward_s
    out.reward_s = rewards
    return out


def simulate_round_robin(
    arrive: np.ndarray,
    tokens: np.ndarray,
    spec: BatcherSpec,
    replicas: int,
    latency: LatencyFn,
    noise: np.ndarray,
    speeds: list[SpeedProfile] | None = None,
    replica_node: Callable[[int], int] = lambda r: 0,
    start_s: float = 0.0,
    sequential: bool = False,
    call_overhead_s: float = 0.0,
    pads: bool = True,
) -> ScoringOutcome:
    """Like ``simulate_scoring`` but with the loop's dispatch: each call to the replica with the fewest calls
    unfinished when it is released (see module doc; the name is the dispatch's older rule).

    ``sequential``: one call per replica holding a contiguous slice (sizes differ by at most one);
    otherwise calls of ``spec.window`` rollouts in finish order, released when their last one
    finishes. Each replica runs its calls first come, first served. ``call_overhead_s``: uncontended
    seconds every call costs on top of its batches (sending it, decoding texts), counted as busy. ``pads``:
    as for ``simulate_scoring``.
    """
    order = np.argsort(arrive, kind="stable")
    n = len(order)
    if sequential:
        bounds = [round(i * n / replicas) for i in range(replicas + 1)]
        calls = [order[bounds[i] : bounds[i + 1]] for i in range(replicas)]
    else:
        calls = [order[i : i + spec.window] for i in range(0, n, spec.window)]
    out = ScoringOutcome.empty(replicas, n, int(tokens.sum()), start_s)
    free_at = [start_s] * replicas
    ends: list[list[float]] = [[] for _ in range(replicas)]  # each replica's calls' end times
    for k, call in enumerate(calls):
        if not len(call):
            continue
        released = max(float(arrive[call].max()), start_s)
        if sequential:
            replica = k
        else:
            unfinished = [len(e) - bisect_right(e, released) for e in ends]  # a replica's ends only grow
            replica = least_outstanding(unfinished, [len(e) for e in ends])
        now = max(free_at[replica], released)
        for i, batch in enumerate(split_call(call, tokens, spec)):
            padded = int(len(batch) * tokens[batch].max()) if pads else int(tokens[batch].sum())
            work = latency(len(batch), padded) * float(noise[out.batches % len(noise)])
            work += call_overhead_s if i == 0 else 0.0
            end = speeds[replica_node(replica)].end_time(now, work) if speeds else now + work
            out.record(replica, now, end, batch, padded)
            now = end
        free_at[replica] = now
        ends[replica].append(now)
    return out
