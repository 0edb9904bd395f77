"""The step backend on Ray: each schedule call becomes actor calls; scoring replicas run concurrently.

Scoring is fault tolerant: a scorer that dies mid-step is restarted by Ray (``max_restarts``) and
its unfinished batches are sent again, so the step still scores every rollout exactly once. A dead
rollout or trainer actor ends the step with an ``RlsimError`` (the run's finished steps are on disk).
Faults can be injected on purpose (``FaultPlan``): the backend kills an actor at a set point of a step.
Every wait has a deadline (``PhaseTimeouts``; scoring: ``score_timeout_s`` per batch), so a stalled
engine or trainer fails the step with a ``PhaseTimeout`` naming the phase instead of hanging it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import ray

from rlsim.actors.ray_actors import ActorSet, _cause
from rlsim.actors.server_faults import ServerFault
from rlsim.errors import RlsimError
from rlsim.loop.deadline import Deadline, PhaseTimeouts
from rlsim.loop.sync import WeightSync
from rlsim.replica_router import ReplicaRouter
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Event, Rollout, RolloutRequest

# How long a batch may keep meeting a restarting scorer before the step gives up (seconds): a
# scorer restart reloads its model, about 20 s on a busy 2-core machine.
RESTART_WAIT_S = 180.0


@dataclass
class FaultPlan:
    """Kill scorer-0 after its first micro-batch of each step in ``kill_scorer_steps``; kill the rollout
    actor during generation of ``kill_rollout_step``; kill (or stall for ``http_stall_s``, None: until
    the client gives up) scorer-0's http server just before its first micro-batch of each step in
    ``kill_http_server_steps`` (``stall_http_server_steps``)."""

    kill_scorer_steps: tuple[int, ...] = ()
    kill_rollout_step: int | None = None
    kill_http_server_steps: tuple[int, ...] = ()
    stall_http_server_steps: tuple[int, ...] = ()
    http_stall_s: float | None = None

    def server_fault(self, step: int) -> ServerFault | None:
        if step in self.kill_http_server_steps:
            return ServerFault("kill")
        if step in self.stall_http_server_steps:
            return ServerFault("stall", self.http_stall_s)
        return None


@dataclass
class PendingScore:
    """A scoring call in flight: enough to send it again if its actor dies."""

    ref: Any
    replica: int
    rollouts: list[Rollout]
    batch: int
    attempts: int = 1
    retries: int = 0
    first_failure: float | None = None


class RayStepBackend:
    def __init__(
        self,
        actors: ActorSet,
        sync: WeightSync,
        max_attempts: int = 3,
        plan: FaultPlan | None = None,
        score_timeout_s: float = 600.0,
        timeouts: PhaseTimeouts | None = None,
    ) -> None:
        self.actors = actors
        self.num_scorers = len(actors.scorers)
        self.router = ReplicaRouter(self.num_scorers)  # which replica takes a batch sent with replica None
        self._in_flight: dict[Any, int] = {}  # scoring calls not yet seen back, by ref: their replica
        self._sync = sync
        self._max_attempts = max_attempts
        self._plan = plan or FaultPlan()
        self._score_timeout_s = score_timeout_s
        self._timeouts = timeouts or PhaseTimeouts()
        self._step = 0
        self._sent_to_scorer0 = False  # faults hit scorer-0's first batch of a step
        self._injected_this_step = 0  # scorer faults of this step; all survived if every batch gets scored
        # resubmitted_batches: batches sent again after their scorer died (all that were queued on it);
        # scorer_failures: scorers found dead, counted once per replica and step.
        self.faults = {"injected": 0, "survived": 0, "resubmitted_batches": 0, "scorer_failures": 0}

    def begin_step(self, step: int) -> None:
        """Tell the backend which step runs next (for the fault plan)."""
        self._step = step
        self._sent_to_scorer0 = False
        self._injected_this_step = 0

    def generate(
        self, requests: Sequence[RolloutRequest], deadline: Deadline | None = None
    ) -> tuple[list[Rollout], list[Event]]:
        ref = self.actors.rollout.generate.remote(list(requests))
        self._maybe_kill_rollout()
        return self._get(ref, "rollout", deadline or self._timeouts.start("generate"))

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[tuple[list[Rollout], Event]]:
        """Micro-batches as the rollout actor finishes them; the whole stream shares one generate deadline."""
        deadline = self._timeouts.start("generate")
        gen = self.actors.rollout.stream.remote(list(requests), micro_batch)
        while True:
            # ray.wait on a generator: ready once its next item (or its end) is there.
            ready, _ = ray.wait([gen], timeout=deadline.remaining())
            if not ready:
                raise deadline.expired("the rollout actor")
            try:
                ref = next(gen)
            except StopIteration:
                return
            item = self._get(ref, "rollout", deadline)
            self._maybe_kill_rollout()
            yield item

    def submit_score(self, replica: int | None, rollouts: list[Rollout], batch: int) -> PendingScore:
        """Send one batch to ``replica``, or with None to the one with the fewest calls outstanding (the router
        first learns which calls came back, without waiting)."""
        if replica is None:
            self._note_finished()
            replica = self.router.pick()
        first = replica == 0 and not self._sent_to_scorer0
        self._sent_to_scorer0 |= replica == 0
        fault = self._plan.server_fault(self._step) if first else None  # applied by the worker (its child)
        ref = self.actors.scorers[replica].score.remote(rollouts, batch, fault)
        if fault is not None:
            self._injected()
        if first and self._step in self._plan.kill_scorer_steps:
            self._injected()
            ray.kill(self.actors.scorers[0], no_restart=False)  # Ray restarts it (max_restarts)
        self._sent(ref, replica, len(rollouts))
        return PendingScore(ref, replica, rollouts, batch)

    def _sent(self, ref: Any, replica: int, rollouts: int, resent: bool = False) -> None:
        self.router.sent(replica, rollouts, resent)
        self._in_flight[ref] = replica

    def _back(self, ref: Any) -> None:
        replica = self._in_flight.pop(ref, None)
        if replica is not None:
            self.router.finished(replica)

    def _note_finished(self) -> None:
        """Tell the router which scoring calls have come back since it last looked (no waiting)."""
        if self._in_flight:
            done, _ = ray.wait(list(self._in_flight), num_returns=len(self._in_flight), timeout=0)
            for ref in done:
                self._back(ref)

    def _injected(self) -> None:
        self.faults["injected"] += 1
        self._injected_this_step += 1

    def _maybe_kill_rollout(self) -> None:
        if self._step == self._plan.kill_rollout_step:
            self._plan.kill_rollout_step = None  # once
            self.faults["injected"] += 1
            ray.kill(self.actors.rollout, no_restart=True)

    def collect(self, handles: list[PendingScore]) -> list[tuple[dict[int, float], list[Event]]]:
        """Results of every pending score, re-sending a batch whose scorer died (up to ``max_attempts``)."""
        pending = {p.ref: p for p in handles}
        failed_replicas: set[int] = set()
        results = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=self._score_timeout_s)
            if not done:  # a stalled scorer must fail the step, not hang it
                where = sorted({f"scorer-{p.replica}" for p in pending.values()})
                raise RlsimError(
                    f"no scoring batch finished within {self._score_timeout_s:g} s ({len(pending)} waiting on "
                    f"{', '.join(where)}); the scorer stalls: check its runtime (e.g. the http server), or raise "
                    "faults.score_timeout_s"
                )
            p = pending.pop(done[0])
            self._back(p.ref)
            try:
                results.append(self._get(p.ref, f"scorer-{p.replica}", None, fatal=False))
            except ray.exceptions.RayActorError as err:
                retry = self._resend(p, err)
                failed_replicas.add(p.replica)
                pending[retry.ref] = retry
        self.faults["scorer_failures"] += len(failed_replicas)
        # Every rollout was scored despite this step's faults: survived. (A failed batch raised above.)
        self.faults["survived"] += self._injected_this_step
        self._injected_this_step = 0
        return results

    def _resend(self, p: PendingScore, err: Exception) -> PendingScore:
        """Send ``p`` again after a short back-off, to another replica when there is one (the router's pick
        without the dead one; with one replica, to it once Ray has restarted it). A call refused while the actor
        restarts (``ActorUnavailableError``) is not counted as an attempt, up to ``RESTART_WAIT_S`` in all."""
        unavailable = isinstance(err, getattr(ray.exceptions, "ActorUnavailableError", ()))
        attempts = p.attempts + (0 if unavailable else 1)
        waited = time.monotonic() - (p.first_failure or time.monotonic())
        if attempts > self._max_attempts or waited > RESTART_WAIT_S:
            raise RlsimError(
                f"scorer-{p.replica} failed {p.attempts} times scoring batch {p.batch} ({_cause(err)}); raise "
                "faults.score_attempts / faults.scorer_restarts, or look at the scorer's log for why it dies"
            ) from None
        self.faults["resubmitted_batches"] += 1
        self._note_finished()
        replica = self.router.pick(exclude={p.replica})
        if replica == p.replica:  # no other replica: wait for Ray to restart this one
            time.sleep(min(2.0, 0.1 * 2 ** min(p.retries, 5)))
        ref = self.actors.scorers[replica].score.remote(p.rollouts, p.batch)
        self._sent(ref, replica, len(p.rollouts), resent=True)
        return PendingScore(
            ref, replica, p.rollouts, p.batch, attempts, p.retries + 1, p.first_failure or time.monotonic()
        )

    def train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> tuple[dict[str, Any], list[Event]]:
        return self._get(self.actors.trainer.train.remote(rollouts, rewards), "trainer", self._timeouts.start("update"))

    def sync(self) -> tuple[SyncResult, list[Event]]:
        deadline = self._timeouts.start("sync")

        def reload() -> tuple[SyncResult, list[Event]]:
            # The weights go trainer -> rollout actor through the object store; the driver never holds them.
            state_ref, event_ref = self.actors.trainer.export_weights.options(num_returns=2).remote()
            result, events = self._get(self.actors.rollout.load_weights.remote(state_ref), "rollout", deadline)
            return result, [self._get(event_ref, "trainer", deadline)] + events

        def simulate(seconds: float, reason: str) -> tuple[SyncResult, list[Event]]:
            return self._get(self.actors.rollout.simulate_sync.remote(seconds, reason), "rollout", deadline)

        return self._sync.run(reload, simulate)

    def warmup(self, requests: Sequence[RolloutRequest]) -> None:
        """One small generate, a score on every replica and a trainer forward: first-call costs out of step 1."""
        deadline = self._timeouts.start("warmup")
        rollouts, _ = self.generate(requests, deadline)
        refs = [s.score.remote(rollouts, -1) for s in self.actors.scorers]  # all replicas at once
        for i, ref in enumerate(refs):
            self._get(ref, f"scorer-{i}", deadline)
        self._get(self.actors.trainer.warmup.remote(rollouts), "trainer", deadline)

    def cpu_seconds(self) -> dict[str, tuple[int, float]]:
        """Per actor: (pid, CPU seconds of its process tree so far). A new pid means Ray restarted it."""
        deadline = self._timeouts.start("probe")
        refs = [a.cpu_seconds.remote() for a in self.actors.all]
        _, waiting = ray.wait(refs, num_returns=len(refs), timeout=deadline.remaining())
        if waiting:  # an actor still busy with (stuck in) an earlier call cannot answer
            busy = [name for name, ref in zip(self.actors.names, refs, strict=True) if ref in waiting]
            raise deadline.expired(f"the {', '.join(busy)} actor{'s' if len(busy) > 1 else ''}")
        return {name: self._get(ref, name, deadline) for name, ref in zip(self.actors.names, refs, strict=True)}

    def _get(self, ref: Any, role: str, deadline: Deadline | None, fatal: bool = True) -> Any:
        """``ray.get`` until ``deadline`` (None: ``ref`` is known to be ready) with the worker's own
        ``RlsimError`` re-raised as is; a dead actor is an ``RlsimError`` when ``fatal``, else its
        ``RayActorError`` propagates (the caller recovers)."""
        try:
            return ray.get(ref, timeout=deadline.remaining() if deadline else None)
        except ray.exceptions.GetTimeoutError:
            assert deadline is not None
            raise deadline.expired(f"the {role} actor") from None
        except ray.exceptions.RayTaskError as err:
            if isinstance(err.cause, RlsimError):  # a user-fixable problem: show its message, not a traceback
                raise err.cause from None
            raise
        except ray.exceptions.RayActorError as err:
            if not fatal:
                raise
            raise RlsimError(f"the {role} actor died: {_cause(err)}") from None
