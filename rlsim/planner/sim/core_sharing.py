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
processes on the same cores).

Generation on the same cores (shared placement, a streaming schedule) is one more claimant of the same pool
(``GenerationClaim``), not a second factor: the profile's contention entry says how fast one process wanting the
whole pool runs beside generation (``1 / (1 + score_slowdown)``) and how fast generation runs beside it
(``1 / (1 + gen_slowdown)``). Read as a processor-sharing pool, that pair gives generation a claim ``g`` (one
such process claims 1) and the pool a throughput ``eta`` while both run (the pair's combined rate, oversubscribed
threads' loss included):

    g = (1 + score_slowdown) / (1 + gen_slowdown),    eta = 1 / (1 + score_slowdown) + 1 / (1 + gen_slowdown)

so with processes wanting ``k`` pools busy beside it each runs at ``eta / (k + g)`` and generation at
``eta g / (k + g)``: three roles beside generation are each slowed about as much as when they share the pool among
themselves, and generation by the pool's split, not by the product of the two (issue 31: the product predicted
PPO's reference pass at 5.5-5.9 s where the loop measured 2.3 s). With at most one pool's worth of processes busy
this is exactly the pairwise contention model the GRPO step uses (``step.py``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# (value at time t, the next time after t at which it changes; inf if never)
StepFn = Callable[[float], tuple[float, float]]
_EPS = 1e-12


@dataclass(frozen=True)
class GenerationClaim:
    """Generation on the pool's cores as a claimant of it; ``busy(t)``: the share of the node's engines still
    generating at ``t`` (0..1) and when that changes. The slowdowns are the profile's contention entry."""

    busy: StepFn
    score_slowdown: float
    gen_slowdown: float

    @property
    def claim(self) -> float:
        """Generation's claim on the pool, a process wanting the whole pool claiming 1."""
        return (1.0 + self.score_slowdown) / (1.0 + self.gen_slowdown)

    def pool_rate(self, busy: float) -> float:
        """The pool's throughput while generation (``busy`` of its engines) runs beside one pool's worth of
        processes; 1 at ``busy`` 0, the pair's ``eta`` at 1, and exactly ``1 / (1 + score_slowdown x busy)`` for
        such a process (``SpeedProfile.from_ends``, the GRPO step's scorer model) in between."""
        return (1.0 + self.claim * busy) / (1.0 + self.score_slowdown * busy)

    def process_rate(self, pools: float, busy: float, alone: float) -> float:
        """Rate of each busy process while they want ``pools`` pools and ``busy`` of the engines generate;
        ``alone``: their rate without generation. Generation never speeds them up."""
        if busy <= 0:
            return alone
        return min(alone, self.pool_rate(busy) / (max(pools, 1.0) + self.claim * busy))

    def generation_rate(self, pools: float) -> float:
        """Generation's rate while processes wanting ``pools`` pools are busy beside it: ``1 / (1 + gen_slowdown
        x pools)`` up to one pool (the GRPO step's model, ``SpeedProfile.from_load``), its share of the
        pair's throughput beyond."""
        if pools <= 1.0:
            return 1.0 / (1.0 + self.gen_slowdown * pools)
        return self.pool_rate(1.0) * self.claim / (pools + self.claim)


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
    generation: GenerationClaim | None = None,
    efficiency: float = 1.0,
) -> float:
    """Time every call in place; returns when the last one ends (0 with none).

    ``weights``: units each process wants (its threads); ``capacity``: units of the shared pool.
    ``generation``: generation on the same cores, claiming its share of the pool while it runs.
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
        engines, change = generation.busy(now) if generation else (0.0, math.inf)
        change = change if change > now else math.inf  # a step function must look ahead; never stall
        demand = sum(weights[p] for p in busy)
        rate = 1.0 if demand <= capacity else efficiency * capacity / demand
        if generation:
            rate = generation.process_rate(demand / capacity, engines, rate)
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
