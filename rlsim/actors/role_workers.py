"""The experience roles as process-level workers (the reference and the critic), and colocation.

- ``ReferenceWorker`` holds a ``ReferenceModel`` (frozen): log-probs of response tokens, per micro-batch.
- ``CriticWorker`` holds a ``CriticModel``: values per micro-batch, and its own update each step.
- ``ColocatedWorker`` holds several roles' workers in one process (``placement.colocate``). The roles
  take turns: a Ray actor runs one call at a time, as OpenRLHF's colocated models do. It answers every
  method of the roles it holds, so the step backend calls it like the role's own actor.

Plain Python, no Ray (``rlsim.actors.ray_actors`` turns them into actors); tests run them in-process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlsim.actors.server_faults import ServerFault
from rlsim.actors.workers import ScoringWorker, TrainerWorker, _Worker
from rlsim.placement import ResolvedPlacement
from rlsim.rollout.types import Event, Rollout


class ReferenceWorker(_Worker):
    """Holds the frozen reference; ``logprobs`` gives one float32 array per uid (response length)."""

    def __init__(self, name: str, placement: ResolvedPlacement | None, make: Callable[[], Any], pin: bool = True):
        super().__init__(name, placement, pin)
        self.model = make()
        self._mark_started()

    def ref_logprobs(self, rollouts: Sequence[Rollout], batch: int) -> tuple[dict[int, Any], list[Event]]:
        t0 = time.time()
        out = self.model.logprobs(rollouts)
        return out, [self._event("reference", batch, t0, time.time(), len(rollouts))]

    def close(self) -> None:
        self.model.close()


class CriticWorker(_Worker):
    """Holds the critic; ``values`` per micro-batch in the experience phase, ``update_critic`` once a step."""

    def __init__(self, name: str, placement: ResolvedPlacement | None, make: Callable[[], Any], pin: bool = True):
        super().__init__(name, placement, pin)
        self.critic = make()
        self._mark_started()

    def values(self, rollouts: Sequence[Rollout], batch: int) -> tuple[dict[int, Any], list[Event]]:
        t0 = time.time()
        out = self.critic.values(rollouts)
        return out, [self._event("values", batch, t0, time.time(), len(rollouts))]

    def update_critic(
        self, rollouts: Sequence[Rollout], returns: Mapping[int, Any], old_values: Mapping[int, Any]
    ) -> tuple[dict[str, Any], list[Event]]:
        t0 = time.time()
        stats = self.critic.update(rollouts, returns, old_values)
        return stats.as_dict(), [self._event("update_critic", 0, t0, time.time(), len(rollouts))]

    def close(self) -> None:
        self.critic.close()


# role -> the worker class that holds it inside a colocated process.
ROLE_WORKERS: dict[str, Callable[..., Any]] = {
    "scorer": ScoringWorker,
    "trainer": TrainerWorker,
    "reference": ReferenceWorker,
    "critic": CriticWorker,
}


class ColocatedWorker(_Worker):
    """Several roles in one process, pinned to one placement. ``members``: role -> (event name, factory);
    each role's events keep its own name (``scorer-0``, ``reference``), so the timeline shows who worked."""

    def __init__(
        self,
        name: str,
        placement: ResolvedPlacement | None,
        members: Mapping[str, tuple[str, Callable[[], Any]]],
        pin: bool = True,
    ) -> None:
        super().__init__(name, placement, pin)
        self._roles: dict[str, Any] = {}
        for role, (member_name, make) in members.items():
            # Pinning is per process: the first member pinned it already.
            self._roles[role] = ROLE_WORKERS[role](member_name, placement, make, pin=False)
        self._mark_started()

    def _role(self, role: str) -> Any:
        if role not in self._roles:
            raise RuntimeError(f"{self.name} holds {', '.join(self._roles)}, not the {role}")
        return self._roles[role]

    def ready(self) -> dict[str, Any]:
        return {**super().ready(), "roles": list(self._roles)}

    def score(self, rollouts: Sequence[Rollout], batch: int, fault: ServerFault | None = None) -> Any:
        return self._role("scorer").score(rollouts, batch, fault)

    def server_pid(self) -> int | None:
        return self._role("scorer").server_pid()

    def train(self, rollouts: Sequence[Rollout], rewards: dict[int, float]) -> Any:
        return self._role("trainer").train(rollouts, rewards)

    def experience(
        self, rollouts: Sequence[Rollout], rewards: dict[int, float], ref_logprobs: Any = None, values: Any = None
    ) -> Any:
        return self._role("trainer").experience(rollouts, rewards, ref_logprobs, values)

    def update_actor(self) -> Any:
        return self._role("trainer").update_actor()

    def warmup(self, rollouts: Sequence[Rollout]) -> None:
        self._role("trainer").warmup(rollouts)

    def export_weights(self) -> Any:
        return self._role("trainer").export_weights()

    def save_checkpoint(self, path: str, version: int) -> Any:
        return self._role("trainer").save_checkpoint(path, version)

    def load_checkpoint(self, path: str) -> Any:
        return self._role("trainer").load_checkpoint(path)

    def ref_logprobs(self, rollouts: Sequence[Rollout], batch: int) -> Any:
        return self._role("reference").ref_logprobs(rollouts, batch)

    def values(self, rollouts: Sequence[Rollout], batch: int) -> Any:
        return self._role("critic").values(rollouts, batch)

    def update_critic(
        self, rollouts: Sequence[Rollout], returns: Mapping[int, Any], old_values: Mapping[int, Any]
    ) -> Any:
        return self._role("critic").update_critic(rollouts, returns, old_values)

    def close(self) -> None:
        for worker in self._roles.values():
            worker.close()
