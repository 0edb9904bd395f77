"""The async schedule's backend on Ray: the ``LoopSession``'s actors, called without blocking.

Each actor runs one call at a time in the order the driver sent them, which is what the pipeline's
version tags rely on. Results come through ``RayStepBackend._get`` (a worker's own error re-raised as
is, a dead actor as an ``RlsimError``). Scorer restarts are not retried here: a scorer that dies
fails the async run (the sequential and overlapped schedules resend its batches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray

from rlsim.actors.ray_actors import WEIGHTS_GROUP
from rlsim.loop.backends.ray import RayStepBackend
from rlsim.loop.sync import WeightSync
from rlsim.rollout.types import Rollout, RolloutRequest


class RayAsyncBackend:
    """``AsyncBackend`` over a started session's ``RayStepBackend``; handles are ``ObjectRef``s."""

    def __init__(self, step_backend: RayStepBackend, sync: WeightSync, partial: bool = False) -> None:
        self._b, self._sync, self._partial = step_backend, sync, partial
        self._actors = step_backend.actors
        if partial:  # the rollout actor's version counts this pipeline's updates (it may have run another)
            self._b._get(self._actors.rollout.new_pipeline.remote(), "rollout", None)
        self.num_scorers = step_backend.num_scorers
        self._roles: dict[Any, str] = {}
        self._export_events: dict[Any, Any] = {}

    def _sent(self, ref: Any, role: str) -> Any:
        self._roles[ref] = role
        return ref

    def submit_generate(self, requests: Sequence[RolloutRequest], version: int) -> Any:
        start = version if self._partial else None  # without partial rollouts the actor's queue keeps the order
        return self._sent(self._actors.rollout.generate.remote(list(requests), start), "rollout")

    def submit_score(self, replica: int, rollouts: list[Rollout], batch: int) -> Any:
        return self._sent(self._actors.scorers[replica].score.remote(rollouts, batch), f"scorer-{replica}")

    def submit_train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> Any:
        return self._sent(self._actors.trainer.train.remote(rollouts, rewards), "trainer")

    def submit_sync(self, version: int) -> Any:
        """Export now (queued on the trainer ahead of any later update); the rollout actor loads the
        weights after its current call, straight from the object store, or with partial rollouts between
        two engine steps of it (``offer_weights`` in its own concurrency group)."""
        sync, rollout = self._sync, self._actors.rollout
        if sync.mode == "simulated":
            return self._sent(rollout.simulate_sync.remote(sync.simulated_s, "trainer.sync: simulated"), "rollout")
        state_ref, event_ref = self._actors.trainer.export_weights.options(num_returns=2).remote()
        if self._partial:
            offer = rollout.offer_weights.options(concurrency_group=WEIGHTS_GROUP)
            ref = self._sent(offer.remote(state_ref, version), "rollout")
        else:
            ref = self._sent(rollout.load_weights.remote(state_ref), "rollout")
        self._export_events[ref] = event_ref
        return ref

    def submit_checkpoint(self, path: str, version: int) -> Any:
        return self._sent(self._actors.trainer.save_checkpoint.remote(path, version), "trainer")

    def submit_restore(self, path: str) -> Any:
        return self._sent(self._actors.trainer.load_checkpoint.remote(path), "trainer")

    def wait(self, handles: list[Any], timeout: float | None) -> list[Any]:
        ready, _ = ray.wait(handles, num_returns=1, timeout=timeout)
        return list(ready)

    def result(self, handle: Any) -> Any:
        out = self._b._get(handle, self._roles.pop(handle), None)
        event_ref = self._export_events.pop(handle, None)
        if event_ref is not None:
            sync, events = out
            return sync, [self._b._get(event_ref, "trainer", None)] + events
        return out

    def close(self) -> None:
        pass
