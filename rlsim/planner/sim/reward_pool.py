"""Rule-based rewards: a pool of CPU worker processes, each scoring one rollout at a time.

A rollout joins one first-come-first-served queue when it is generated; ``workers`` identical
workers (the concurrency cap) take the oldest waiting rollout whenever they free up, and each
rollout holds its worker for a service time drawn from the reward function's distribution. That is
a G/G/c queue; with Poisson arrivals and exponential service it is M/M/c, whose mean wait is
Erlang C's (``erlang_c_wait_s``; ``tests/planner/test_reward_pool.py`` checks the two agree).

FCFS with identical servers needs no event loop: the k-th arrival (in time order) starts at the
later of its arrival and the earliest time any worker frees, which a heap of ``workers`` free
times gives in O(n log c).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from rlsim.planner.profile.scaling import RewardFunctionModel
from rlsim.planner.sim.events import SpeedProfile
from rlsim.planner.sim.scoring import ScoringOutcome


def simulate_reward_pool(
    arrive: np.ndarray, service_s: np.ndarray, workers: int, workers_per_node: int, start_s: float = 0.0
) -> ScoringOutcome:
    """Score rollouts arriving at ``arrive`` (seconds, any order) taking ``service_s`` each on ``workers``.

    Worker ``w`` lives on node ``w // workers_per_node`` (kept for the busy intervals' bookkeeping).
    ``start_s``: when the workers start (the sequential schedule starts them after generation).
    """
    order = np.argsort(arrive, kind="stable")
    out = ScoringOutcome.empty(workers, len(arrive), len(arrive), start_s)
    free = [(start_s, w) for w in range(workers)]
    heapq.heapify(free)
    ends = np.empty(len(arrive))
    starts_list = out.busy_starts
    ends_list = out.busy_ends
    for i, at, service in zip(order.tolist(), arrive[order].tolist(), service_s[order].tolist(), strict=True):
        free_at, worker = heapq.heappop(free)
        begin = at if at > free_at else free_at
        end = begin + service
        starts_list[worker].append(begin)
        ends_list[worker].append(end)
        ends[i] = end
        heapq.heappush(free, (end, worker))
    out.reward_s = ends
    out.batches = len(arrive)
    out.padded_tokens = len(arrive)  # one rollout per call: no padding
    out.done_s = float(ends.max()) if len(ends) else start_s
    return out


def score_in_chunks(
    chunks: Sequence[np.ndarray],
    ready_s: Sequence[float],
    service_s: np.ndarray,
    pools: int,
    workers: int,
    pools_per_node: int,
    speeds: Sequence[SpeedProfile] | None = None,
    start_s: float = 0.0,
) -> ScoringOutcome:
    """Rule-based rewards as the loop's scoring actors run them: ``chunks`` of rollout indices (a scoring call's
    batches), each ready at ``ready_s``, go in ready order to the pool that frees first; a chunk's rollouts take
    the pool's ``workers`` first come first served, and the pool takes its next chunk once the last check of this
    one ends (the actor's batch: ``rlsim.rewards.sandbox_reward``, ``function_reward``). Worker ``w`` of pool
    ``p`` is replica ``p x workers + w``; pool ``p`` lives on node ``p // pools_per_node`` and runs at that node's
    ``speeds`` (contention with generation on shared cores; None: full speed)."""
    n = len(service_s)
    out = ScoringOutcome.empty(pools * workers, n, n, start_s)
    free = [(start_s, p) for p in range(pools)]
    heapq.heapify(free)
    ends = np.full(n, start_s)
    for c in sorted(range(len(chunks)), key=lambda i: (ready_s[i], i)):
        pool_free, pool = heapq.heappop(free)
        speed = speeds[pool // pools_per_node] if speeds is not None else None
        begin = max(float(ready_s[c]), pool_free)
        slots = [(begin, w) for w in range(workers)]
        last = begin
        for i in chunks[c].tolist():
            at, w = heapq.heappop(slots)
            end = (
                speed.time_at(speed.work_at(at) + float(service_s[i]))
                if speed is not None
                else at + float(service_s[i])
            )
            out.busy_starts[pool * workers + w].append(at)
            out.busy_ends[pool * workers + w].append(end)
            ends[i] = end
            last = max(last, end)
            heapq.heappush(slots, (end, w))
        heapq.heappush(free, (last, pool))
    out.reward_s = ends
    out.batches = len(chunks)
    out.padded_tokens = n  # one rollout per check: no padding
    out.done_s = float(ends.max()) if n else start_s
    return out


def chunked(indices: np.ndarray, size: int) -> list[np.ndarray]:
    """``indices`` cut into runs of at most ``size``, in order."""
    return [indices[i : i + size] for i in range(0, len(indices), max(size, 1))]


def service_times(model: RewardFunctionModel, seed: int, step: int, rollouts: int) -> np.ndarray:
    """Service times for one step's rollouts (seconds), reproducible from ``seed`` and ``step``."""
    return model.sample(np.random.default_rng([seed, step, 2]), rollouts)


def erlang_c_wait_s(arrival_rate: float, mean_service_s: float, workers: int) -> float:
    """Mean time in queue of an M/M/c queue (Erlang C): ``C(c, a) / (c mu - lambda)``, a = lambda / mu."""
    mu = 1.0 / mean_service_s
    a = arrival_rate / mu
    if a >= workers:
        raise ValueError(f"load {a:.2f} >= {workers} workers: the queue grows without bound")
    below = sum(a**k / math.factorial(k) for k in range(workers))
    top = a**workers / math.factorial(workers) * workers / (workers - a)
    return top / (below + top) / (workers * mu - arrival_rate)


def allen_cunneen_wait_s(arrival_rate: float, mean_service_s: float, cv: float, workers: int) -> float:
    """Allen-Cunneen approximation of an M/G/c queue's mean wait: Erlang C x (1 + cv^2) / 2."""
    return erlang_c_wait_s(arrival_rate, mean_service_s, workers) * (1.0 + cv**2) / 2.0
