"""Processes sharing one pool of cores: each works through its calls in order, the busy ones split the pool.

PPO's experience roles (scorers, reference, critic; later the actor and critic updates) are separate
processes pinned to the same cores, each with as many threads as it was given cores. While the
threads they want fit the pool every busy process runs at full speed; beyond that the pool is split
in proportion (fluid processor sharing): with ``capacity`` units and busy processes wanting
``w_1 .. w_k``, each runs at ``min(1, capacity / sum(w))`` of its speed alone. Roles in one process
(``placement.colocate``) take turns: their calls are one queue, served in submission order.

With ``efficiency`` 1 this is work-conserving: three 2-thread processes on 2 cores finish their calls
no sooner and no later than one process running them back to back. Oversubscribed threads lose some
of the pool (OpenMP workers spin and preempt each other): ``efficiency`` < 1 is the share of the work
still done while the busy processes want more than the pool holds (the profile measures it with two
processes on the same cores). ``speed(t)``, when given, multiplies every rate: the slowdown from
generation running on the same cores (the profile's ``score_slowdown``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# (speed at time t in (0, 1], the next time after t at which it changes; inf if never)
SpeedFn = Callable[[float], tuple[float, float]]
_EPS = 1e-12


@dataclass
class Call:
    """One call to a process: released at ``release`` s, ``work`` seconds alone at full speed.

    ``order`` breaks ties between calls released at once (the order the driver sent them); ``start``
    and ``end`` (seconds) are filled in by ``share_cores``.
    """

    process: str
    role: str
    release: float
    work: float
    order: int = 0
    start: float = math.nan
    end: float = math.nan


def share_cores(
    calls: Sequence[Call],
    weights: dict[str, float],
    capacity: float,
    speed: SpeedFn | None = None,
    efficiency: float = 1.0,
) -> float:
    """Time every call in place; returns when the last one ends (0 with none).

    ``weights``: units each process wants (its threads); ``capacity``: units of the shared pool.
    ``efficiency``: the share of the pool's work that gets done while the busy processes want more
    than it holds (threads preempting each other; 1.0: none lost). Raises ``ValueError`` for a call
    of a process without a weight, or a non-positive weight, capacity or efficiency.
    """
    if capacity <= 0 or efficiency <= 0 or any(w <= 0 for w in weights.values()):
        raise ValueError("capacity, efficiency and every process weight must be positive")
    queues: dict[str, deque[Call]] = {}
    for call in sorted(calls, key=lambda c: (c.release, c.order)):
        if call.process not in weights:
            raise ValueError(f"call of {call.role} names process {call.process!r}, which has no weight")
        queues.setdefault(call.process, deque()).append(call)
    left = {id(c): max(c.work, 0.0) for c in calls}
    now, last = 0.0, 0.0
    while queues:
        heads = {p: q[0] for p, q in queues.items()}
        busy = [p for p, c in heads.items() if c.release <= now + _EPS]
        waiting = [c.release for c in heads.values() if c.release > now + _EPS]
        if not busy:
            now = min(waiting)
            continue
        factor, change = speed(now) if speed else (1.0, math.inf)
        change = change if change > now else math.inf  # a speed function must look ahead; never stall
        demand = sum(weights[p] for p in busy)
        rate = factor * (1.0 if demand <= capacity else efficiency * capacity / demand)
        for p in busy:
            if math.isnan(heads[p].start):
                heads[p].start = now
        step = min([left[id(heads[p])] / rate for p in busy] + [t - now for t in waiting] + [change - now])
        step = max(step, 0.0)
        now += step
        for p in busy:
            call = heads[p]
            left[id(call)] -= rate * step
            if left[id(call)] <= _EPS * max(1.0, call.work):
                call.end = now
                last = max(last, now)
                queues[p].popleft()
                if not queues[p]:
                    del queues[p]
    return last


def busy_intervals(calls: Iterable[Call], role: str) -> list[tuple[float, float]]:
    """``(start, end)`` of every timed call of ``role``."""
    return [(c.start, c.end) for c in calls if c.role == role and not math.isnan(c.end)]
