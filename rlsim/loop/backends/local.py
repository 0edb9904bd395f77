"""The step backend without Ray: workers called in this process, one after another.

Used by the unit tests (with test doubles inside the workers) and useful for stepping through a
schedule in a debugger. Scoring runs when submitted, so nothing actually overlaps here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.loop.sync import WeightSync
from rlsim.replica_router import ReplicaRouter
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Event, Rollout, RolloutRequest


class InProcessBackend:
    def __init__(
        self, rollout: RolloutWorker, scorers: list[ScoringWorker], trainer: TrainerWorker, sync: WeightSync
    ) -> None:
        if not scorers:
            raise ValueError("at least one scoring worker is needed")
        self.rollout, self.scorers, self.trainer, self._sync = rollout, scorers, trainer, sync
        self.num_scorers = len(scorers)
        self.router = ReplicaRouter(self.num_scorers)  # calls finish as they are made here: round robin

    def generate(self, requests: Sequence[RolloutRequest]) -> tuple[list[Rollout], list[Event]]:
        return self.rollout.generate(requests)

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[tuple[list[Rollout], Event]]:
        return self.rollout.stream(requests, micro_batch)

    def submit_score(self, replica: int | None, rollouts: list[Rollout], batch: int) -> Any:
        replica = self.router.pick() if replica is None else replica
        self.router.sent(replica, len(rollouts))
        try:
            return self.scorers[replica].score(rollouts, batch)
        finally:
            self.router.finished(replica)

    def collect(self, handles: list[Any]) -> list[tuple[dict[int, float], list[Event]]]:
        return list(handles)

    def train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> tuple[dict[str, Any], list[Event]]:
        return self.trainer.train(rollouts, rewards)

    def sync(self) -> tuple[SyncResult, list[Event]]:
        def reload() -> tuple[SyncResult, list[Event]]:
            state, export_event = self.trainer.export_weights()
            result, events = self.rollout.load_weights(state)
            return result, [export_event] + events

        return self._sync.run(reload, self.rollout.simulate_sync)

    def cpu_seconds(self) -> dict[str, tuple[int, float]]:
        # One process: every worker would report the same total, so report it once.
        return {"in-process": self.rollout.cpu_seconds()}


class InProcessExperienceBackend(InProcessBackend):
    """``InProcessBackend`` plus the reference and the critic (``rlsim.loop.schedules.ppo``); either may be
    None when the algorithm does not use it."""

    def __init__(
        self,
        rollout: RolloutWorker,
        scorers: list[ScoringWorker],
        trainer: TrainerWorker,
        sync: WeightSync,
        reference: Any = None,
        critic: Any = None,
    ) -> None:
        super().__init__(rollout, scorers, trainer, sync)
        self.reference, self.critic = reference, critic
        self.uses_reference, self.uses_critic = reference is not None, critic is not None

    def submit_reference(self, rollouts: list[Rollout], batch: int) -> Any:
        return self.reference.ref_logprobs(rollouts, batch)

    def submit_values(self, rollouts: list[Rollout], batch: int) -> Any:
        return self.critic.values(rollouts, batch)

    def collect_experience(self, handles: list[Any]) -> list[Any]:
        return list(handles)

    def experience(
        self, rollouts: list[Rollout], rewards: dict[int, float], ref_logprobs: Any, values: Any
    ) -> tuple[Any, list[Event]]:
        return self.trainer.experience(rollouts, rewards, ref_logprobs, values)

    def update(self, rollouts: list[Rollout], returns: Any, values: Any) -> tuple[dict[str, Any], list[Event]]:
        train, events = self.trainer.update_actor()
        if self.critic is not None:
            stats, critic_events = self.critic.update_critic(rollouts, returns, values)
            train = {**train, "value_loss": stats["value_loss"]}
            events = events + critic_events
        return train, events
