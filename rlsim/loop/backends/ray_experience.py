"""The Ray step backend with the experience roles: the reference and the critic as actors.

Adds to ``RayStepBackend`` what ``rlsim.loop.schedules.ppo`` needs: reference log-probs and critic values
per micro-batch, the advantages on the trainer, and the actor and critic updates sent at once (a
critic colocated with the trainer takes its turn in the same process).

Faults: the reference is frozen, so a reference actor that dies is restarted by Ray
(``max_restarts``) and its unfinished batches are sent again, the same as a scorer's. The critic
trains every step: a restarted critic would have lost its weights and optimizer, so a dead critic
fails the step with an ``RlsimError`` naming it (completed steps are on disk).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray

from rlsim.actors.ray_actors import _cause
from rlsim.errors import RlsimError
from rlsim.loop.backends.ray import RESTART_WAIT_S, RayStepBackend
from rlsim.rollout.types import Event, Rollout, RolloutRequest

RESENDABLE = {"ref_logprobs": "reference"}  # method -> role whose batches are re-sent after a restart


@dataclass
class PendingCall:
    """A reference or values call in flight: enough to send it again if its actor died."""

    ref: Any
    role: str
    method: str
    rollouts: list[Rollout]
    batch: int
    attempts: int = 1
    first_failure: float | None = None


class RayExperienceBackend(RayStepBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.uses_reference = self.actors.reference is not None
        self.uses_critic = self.actors.critic is not None
        self.faults["resubmitted_reference_batches"] = 0

    def _send(
        self,
        role: str,
        method: str,
        rollouts: list[Rollout],
        batch: int,
        attempts: int = 1,
        first_failure: float | None = None,
    ) -> PendingCall:
        handle = self.actors.reference if role == "reference" else self.actors.critic
        ref = getattr(handle, method).remote(rollouts, batch)
        return PendingCall(ref, role, method, rollouts, batch, attempts, first_failure)

    def submit_reference(self, rollouts: list[Rollout], batch: int) -> PendingCall:
        return self._send("reference", "ref_logprobs", rollouts, batch)

    def submit_values(self, rollouts: list[Rollout], batch: int) -> PendingCall:
        return self._send("critic", "values", rollouts, batch)

    def collect_experience(self, handles: list[PendingCall]) -> list[tuple[dict[int, Any], list[Event]]]:
        """Every pending call's result; a reference batch whose actor died is re-sent (up to the
        backend's ``max_attempts``); a dead critic raises ``RlsimError`` naming it."""
        pending = {p.ref: p for p in handles}
        results = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=self._score_timeout_s)
            if not done:
                roles = sorted({p.role for p in pending.values()})
                raise RlsimError(
                    f"no {' or '.join(roles)} batch finished within {self._score_timeout_s:g} s "
                    f"({len(pending)} waiting); the actor stalls: raise faults.score_timeout_s or look "
                    "at its log"
                )
            p = pending.pop(done[0])
            try:
                results.append(self._get(p.ref, p.role, None, fatal=False))
            except ray.exceptions.RayActorError as err:
                retry = self._resend_call(p, err)
                pending[retry.ref] = retry
        return results

    def _resend_call(self, p: PendingCall, err: Exception) -> PendingCall:
        unavailable = isinstance(err, getattr(ray.exceptions, "ActorUnavailableError", ()))
        attempts = p.attempts + (0 if unavailable else 1)
        waited = time.monotonic() - (p.first_failure or time.monotonic())
        if p.method not in RESENDABLE:
            raise RlsimError(
                f"the {p.role} actor died computing batch {p.batch} ({_cause(err)}); the critic "
                "holds weights this run has trained, so it is not restarted: the step fails "
                "(rerun with --resume)"
            ) from None
        if attempts > self._max_attempts or waited > RESTART_WAIT_S:
            raise RlsimError(
                f"the {p.role} actor failed {p.attempts} times on batch {p.batch} ({_cause(err)}); "
                "raise faults.score_attempts / faults.scorer_restarts, or look at its log"
            ) from None
        time.sleep(min(2.0, 0.1 * 2 ** min(attempts, 5)))
        self.faults["resubmitted_reference_batches"] += 1
        return self._send(p.role, p.method, p.rollouts, p.batch, attempts, p.first_failure or time.monotonic())

    def experience(
        self,
        rollouts: list[Rollout],
        rewards: dict[int, float],
        ref_logprobs: Mapping[int, Any] | None,
        values: Mapping[int, Any] | None,
    ) -> tuple[dict[int, Any] | None, list[Event]]:
        ref = self.actors.trainer.experience.remote(rollouts, rewards, ref_logprobs, values)
        return self._get(ref, "trainer", self._timeouts.start("update"))

    def update(
        self, rollouts: list[Rollout], returns: Mapping[int, Any] | None, values: Mapping[int, Any] | None
    ) -> tuple[dict[str, Any], list[Event]]:
        """The actor and critic updates, both sent before either is awaited."""
        deadline = self._timeouts.start("update")
        actor_ref = self.actors.trainer.update_actor.remote()
        critic_ref = None
        if self.uses_critic:
            critic_ref = self.actors.critic.update_critic.remote(rollouts, returns, values)
        train, events = self._get(actor_ref, "trainer", deadline)
        if critic_ref is not None:
            stats, critic_events = self._get(critic_ref, "critic", deadline)
            train = {**train, "value_loss": stats["value_loss"]}
            events = events + critic_events
        return train, events

    def warmup(self, requests: Sequence[RolloutRequest]) -> None:
        """The base warm-up plus one reference and one values call, so step 1 pays no first-call costs."""
        deadline = self._timeouts.start("warmup")
        rollouts, _ = self.generate(requests, deadline)
        calls = [(f"scorer-{i}", s.score.remote(rollouts, -1)) for i, s in enumerate(self.actors.scorers)]
        if self.uses_reference:
            calls.append(("reference", self.actors.reference.ref_logprobs.remote(rollouts, -1)))
        if self.uses_critic:
            calls.append(("critic", self.actors.critic.values.remote(rollouts, -1)))
        for role, ref in calls:
            self._get(ref, role, deadline)
        self._get(self.actors.trainer.warmup.remote(rollouts), "trainer", deadline)
