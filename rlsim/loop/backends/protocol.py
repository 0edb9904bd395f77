"""What every schedule calls to reach the workers: one futures-style interface, two transports.

Each ``submit_*`` sends one call and returns a handle at once; ``wait`` says which handles are done;
``result`` gives what the worker returned (a worker's ``RlsimError`` raised as is); ``results`` gives every
handle's result and, on Ray, sends a scoring or reference call again when its actor died. A step-by-step
schedule waits on each call as it sends it (``backend.result(backend.submit_train(...))``) except scoring,
the reference and the critic, which it sends while generation goes on; the async schedule keeps many calls
in flight and handles them as they finish. ``stream`` is the one call that is not a future: the rollout
worker's micro-batches, as it finishes them.

Implemented in this process (``rlsim.loop.backends.local``, test doubles inside real workers) and on Ray
(``rlsim.loop.backends.ray``, the actors of a ``LoopSession`` or an experiment session).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from rlsim.replica_router import ReplicaRouter
from rlsim.rollout.types import Event, Rollout, RolloutRequest

PerUid = Mapping[int, Any]  # per-rollout arrays (log-probs, values, returns) keyed by uid


class Backend(Protocol):
    """The workers as a schedule sees them. ``num_scorers``: scoring replicas; ``uses_reference`` /
    ``uses_critic``: whether the run has those roles (PPO, a KL); ``router``: which replica takes a scoring call
    sent with replica None (``rlsim.replica_router``: the fewest calls outstanding)."""

    num_scorers: int
    uses_reference: bool
    uses_critic: bool
    router: ReplicaRouter

    def start_pipeline(self, partial: bool) -> None:
        """An async pipeline starts: with ``partial`` rollouts the rollout worker counts versions from here and
        takes weights between engine steps."""
        ...

    def submit_generate(self, requests: Sequence[RolloutRequest], version: int | None = None) -> Any:
        """-> (rollouts, events). ``version``: the policy version last sent to the engine (async only)."""
        ...

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[tuple[list[Rollout], Event]]: ...

    def submit_score(self, replica: int | None, rollouts: list[Rollout], batch: int) -> Any:
        """-> (rewards by uid, events); replica None: the router picks."""
        ...

    def submit_reference(self, rollouts: list[Rollout], batch: int) -> Any:
        """-> (reference log-probs by uid, events)."""
        ...

    def submit_values(self, rollouts: list[Rollout], batch: int) -> Any:
        """-> (critic values by uid, events)."""
        ...

    def submit_train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> Any:
        """One GRPO/RLOO update -> (train stats, events)."""
        ...

    def submit_experience(
        self, rollouts: list[Rollout], rewards: dict[int, float], ref_logprobs: PerUid | None, values: PerUid | None
    ) -> Any:
        """PPO's advantages on the trainer -> (returns by uid or None, events)."""
        ...

    def submit_update(self, rollouts: list[Rollout], returns: PerUid | None, values: PerUid | None) -> Any:
        """PPO's actor and critic updates, both sent before either is awaited -> (train stats, events)."""
        ...

    def submit_sync(self, version: int = 0) -> Any:
        """Export the trainer's weights and load them into the engine as ``version`` (or the configured simulated
        cost) -> (SyncResult, events)."""
        ...

    def submit_checkpoint(self, path: str, version: int) -> Any:
        """The trainer saves its state -> events."""
        ...

    def submit_restore(self, path: str) -> Any:
        """The trainer loads a checkpoint -> (version, events)."""
        ...

    def wait(self, handles: list[Any], timeout: float | None) -> list[Any]:
        """The handles done: at least one, or none after ``timeout`` seconds."""
        ...

    def result(self, handle: Any) -> Any: ...

    def results(self, handles: list[Any]) -> list[Any]:
        """Every handle's result (in the order they finish), re-sending a call whose actor died where that role
        can be re-sent."""
        ...

    def close(self) -> None: ...
