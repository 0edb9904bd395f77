"""Which scoring replica takes the next batch: the one with the fewest calls outstanding.

That is how verl's reward loop spreads requests over its reward servers (its router picks the worker with the
fewest requests in flight and releases it when the answer comes back: ``verl/experimental/reward_loop/router/
naive_router.py`` ``_select_worker`` / ``_release_worker``). Ties go to the replica that was sent the fewest
calls so far, then to the lowest index, so with every call finished at once (in-process scoring) the router is
round robin. A replica found dead is left out of the choice for the call being re-sent (its batch goes to
another replica when there is one), so a dead scorer loses nothing and stalls no other batch behind it.

Per replica the router keeps what the records need: calls and rollouts sent, calls re-sent to it, and the
queue depth (calls outstanding, the new one included) at each send, whose maximum and mean go in each step's
``scoring_replicas``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field


@dataclass
class ReplicaLoad:
    """One replica's calls: ``outstanding`` now; ``depths``: the queue depth it had at each send."""

    outstanding: int = 0
    calls: int = 0
    rollouts: int = 0
    resent_here: int = 0
    depths: list[int] = field(default_factory=list)

    def summary(self, replica: int) -> dict[str, float | int]:
        return {
            "replica": replica,
            "calls": self.calls,
            "rollouts": self.rollouts,
            "resent_here": self.resent_here,
            "max_queue_depth": max(self.depths, default=0),
            "mean_queue_depth": round(sum(self.depths) / len(self.depths), 3) if self.depths else 0.0,
        }


def least_outstanding(outstanding: Sequence[int], calls: Sequence[int], exclude: Collection[int] = ()) -> int:
    """The rule itself: fewest ``outstanding``, then fewest ``calls`` sent, then the lowest index; ``exclude``
    is honoured unless it leaves nothing (the planner's simulators apply it to simulated queues)."""
    choices = [r for r in range(len(outstanding)) if r not in exclude] or list(range(len(outstanding)))
    return min(choices, key=lambda r: (outstanding[r], calls[r], r))


class ReplicaRouter:
    """Least outstanding calls over ``replicas`` scorers; ``sent``/``finished`` keep the counts true."""

    def __init__(self, replicas: int) -> None:
        if replicas < 1:
            raise ValueError(f"a router needs at least one replica, got {replicas}")
        self.loads = [ReplicaLoad() for _ in range(replicas)]

    def pick(self, exclude: Collection[int] = ()) -> int:
        """The replica for the next call (``exclude``: replicas not to use, unless no other is left)."""
        loads = self.loads
        return least_outstanding([x.outstanding for x in loads], [x.calls for x in loads], exclude)

    def sent(self, replica: int, rollouts: int, resent: bool = False) -> None:
        load = self.loads[replica]
        load.outstanding += 1
        load.calls += 1
        load.rollouts += rollouts
        load.resent_here += int(resent)
        load.depths.append(load.outstanding)

    def finished(self, replica: int) -> None:
        """A call on ``replica`` came back (scored, or failed: either way it is no longer queued there)."""
        load = self.loads[replica]
        load.outstanding = max(0, load.outstanding - 1)

    def take_summary(self) -> list[dict[str, float | int]]:
        """Each replica's figures since the last call (one step's), then counting starts again; calls still
        outstanding stay counted as outstanding."""
        out = [load.summary(r) for r, load in enumerate(self.loads)]
        self.loads = [ReplicaLoad(outstanding=load.outstanding) for load in self.loads]
        return out
