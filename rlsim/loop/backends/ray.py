"""The backend on Ray: each call is an actor call; handles are ``Call``s around Ray's object refs.

Every schedule runs on it: a step-by-step schedule waits on each call as it sends it (scoring, the reference
and the critic excepted), the async schedule keeps calls in flight. Each actor runs one call at a time in the
order the driver sent them, which the async pipeline's version tags rely on.

Faults: a scorer or the reference that dies is restarted by Ray (``max_restarts``) and ``results`` sends its
unfinished batches again (to another replica where there is one), so a step still scores every rollout once.
The critic trains every step and a dead rollout or trainer actor has lost state: those fail the step with an
``RlsimError`` naming the actor (finished steps are on disk). ``result`` of a single call never re-sends: a
scorer that dies fails an async run. Faults can be injected on purpose (``FaultPlan``). Every wait has a
deadline (``PhaseTimeouts``; scoring, reference and values: ``score_timeout_s`` per call), so a stalled engine
or trainer fails the step with a ``PhaseTimeout`` naming the phase instead of hanging it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray

from rlsim.actors.ray_actors import WEIGHTS_GROUP, ActorSet, _cause
from rlsim.errors import RlsimError
from rlsim.loop.backends.faults import RESTART_WAIT_S, FaultPlan
from rlsim.loop.backends.protocol import PerUid
from rlsim.loop.deadline import Deadline, PhaseTimeouts
from rlsim.loop.sync import WeightSync
from rlsim.replica_router import ReplicaRouter
from rlsim.rollout.types import Event, Rollout, RolloutRequest

RESENT_COUNTER = {"scorer": "resubmitted_batches", "reference": "resubmitted_reference_batches"}


@dataclass(eq=False)  # a handle: hashed by identity, as the async pipeline keys its jobs by handle
class Call:
    """One actor call in flight. ``role``: the actor as messages name it (``scorer-1``, ``trainer``);
    ``deadline``: None for scoring, reference and values (``score_timeout_s`` per wait instead); ``finish``:
    what turns the ref's value into the call's result (waits for the call's second ref, where it has one);
    ``method``/``rollouts``/``batch``/``replica``: what a re-send needs."""

    ref: Any
    role: str
    deadline: Deadline | None = None
    finish: Callable[[Any], Any] | None = None
    method: str = ""
    rollouts: list[Rollout] = field(default_factory=list)
    batch: int = 0
    replica: int = -1
    attempts: int = 1
    retries: int = 0
    first_failure: float | None = None

    @property
    def kind(self) -> str:
        """``scorer``, ``reference``, ``critic``, ``rollout`` or ``trainer``."""
        return self.role.split("-")[0]


class RayBackend:
    """``Backend`` over an ``ActorSet``; ``max_attempts``: sends of a batch whose actor keeps dying."""

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
        self.uses_reference, self.uses_critic = actors.reference is not None, actors.critic is not None
        self.router = ReplicaRouter(self.num_scorers)
        self._in_flight: dict[Any, int] = {}  # scoring calls not yet seen back, by ref: their replica
        self._sync, self._max_attempts, self._plan = sync, max_attempts, plan or FaultPlan()
        self._score_timeout_s, self._timeouts = score_timeout_s, timeouts or PhaseTimeouts()
        self._partial = False
        self._step = 0
        self._sent_to_scorer0 = False  # faults hit scorer-0's first batch of a step
        self._injected_this_step = 0  # scorer faults of this step; all survived if every batch gets scored
        # resubmitted_*: calls sent again after their actor died; scorer_failures: scorers found dead, counted
        # once per replica and ``results`` call.
        self.faults = {"injected": 0, "survived": 0, "scorer_failures": 0}
        self.faults |= {counter: 0 for counter in RESENT_COUNTER.values()}

    def begin_step(self, step: int) -> None:
        """Tell the backend which step runs next (for the fault plan)."""
        self._step, self._sent_to_scorer0, self._injected_this_step = step, False, 0

    def start_pipeline(self, partial: bool) -> None:
        self._partial = partial
        if partial:  # the rollout actor's version counts this pipeline's updates (it may have run another)
            self._get(self.actors.rollout.new_pipeline.remote(), "rollout", None)

    # ---- generation -------------------------------------------------------------------------------
    def submit_generate(
        self, requests: Sequence[RolloutRequest], version: int | None = None, deadline: Deadline | None = None
    ) -> Call:
        start = version if self._partial else None  # without partial rollouts the actor's queue keeps the order
        ref = self.actors.rollout.generate.remote(list(requests), start)
        self._maybe_kill_rollout()
        return Call(ref, "rollout", deadline or self._timeouts.start("generate"))

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[tuple[list[Rollout], Event]]:
        """Micro-batches as the rollout actor finishes them; the whole stream shares one generate deadline."""
        deadline = self._timeouts.start("generate")
        gen = self.actors.rollout.stream.remote(list(requests), micro_batch)
        while True:
            ready, _ = ray.wait([gen], timeout=deadline.remaining())  # ready once its next item (or end) is there
            if not ready:
                raise deadline.expired("the rollout actor")
            try:
                ref = next(gen)
            except StopIteration:
                return
            item = self._get(ref, "rollout", deadline)
            self._maybe_kill_rollout()
            yield item

    def _maybe_kill_rollout(self) -> None:
        if self._step == self._plan.kill_rollout_step:
            self._plan.kill_rollout_step = None  # once
            self.faults["injected"] += 1
            ray.kill(self.actors.rollout, no_restart=True)

    # ---- scoring, reference, values -------------------------------------------------------------
    def submit_score(self, replica: int | None, rollouts: list[Rollout], batch: int) -> Call:
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
        return Call(ref, f"scorer-{replica}", method="score", rollouts=rollouts, batch=batch, replica=replica)

    def submit_reference(self, rollouts: list[Rollout], batch: int) -> Call:
        ref = self.actors.reference.ref_logprobs.remote(rollouts, batch)
        return Call(ref, "reference", method="ref_logprobs", rollouts=rollouts, batch=batch)

    def submit_values(self, rollouts: list[Rollout], batch: int) -> Call:
        return Call(self.actors.critic.values.remote(rollouts, batch), "critic", rollouts=rollouts, batch=batch)

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

    # ---- the trainer and the weights ---------------------------------------------------------------
    def submit_train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> Call:
        return Call(self.actors.trainer.train.remote(rollouts, rewards), "trainer", self._timeouts.start("update"))

    def submit_experience(
        self, rollouts: list[Rollout], rewards: dict[int, float], ref_logprobs: PerUid | None, values: PerUid | None
    ) -> Call:
        ref = self.actors.trainer.experience.remote(rollouts, rewards, ref_logprobs, values)
        return Call(ref, "trainer", self._timeouts.start("update"))

    def submit_update(self, rollouts: list[Rollout], returns: PerUid | None, values: PerUid | None) -> Call:
        """The actor and critic updates, both sent before either is awaited (a critic colocated with the
        trainer takes its turn in the same process)."""
        deadline = self._timeouts.start("update")
        actor_ref = self.actors.trainer.update_actor.remote()
        if not self.uses_critic:
            return Call(actor_ref, "trainer", deadline)
        critic_ref = self.actors.critic.update_critic.remote(rollouts, returns, values)

        def with_critic(actor: tuple[dict[str, Any], list[Event]]) -> tuple[dict[str, Any], list[Event]]:
            stats, critic_events = self._get(critic_ref, "critic", deadline)
            return {**actor[0], "value_loss": stats["value_loss"]}, actor[1] + critic_events

        return Call(actor_ref, "trainer", deadline, with_critic)

    def submit_sync(self, version: int = 0) -> Call:
        """Export now (queued on the trainer ahead of any later update); the rollout actor loads the weights
        after its current call, straight from the object store (the driver never holds them), or with partial
        rollouts between two engine steps of it (``offer_weights`` in its own concurrency group). A failed
        reload falls back to the simulated cost under ``trainer.sync: auto`` (``WeightSync``)."""
        deadline, rollout = self._timeouts.start("sync"), self.actors.rollout
        reason = self._sync.simulate_reason()
        if reason is not None:
            return Call(rollout.simulate_sync.remote(self._sync.simulated_s, reason), "rollout", deadline)
        state_ref, event_ref = self.actors.trainer.export_weights.options(num_returns=2).remote()
        if self._partial:
            ref = rollout.offer_weights.options(concurrency_group=WEIGHTS_GROUP).remote(state_ref, version)
        else:
            ref = rollout.load_weights.remote(state_ref)

        def with_export(loaded: tuple[Any, list[Event]]) -> tuple[Any, list[Event]]:
            return loaded[0], [self._get(event_ref, "trainer", deadline)] + loaded[1]

        return Call(ref, "rollout", deadline, with_export, method="sync")

    def submit_checkpoint(self, path: str, version: int) -> Call:
        return Call(self.actors.trainer.save_checkpoint.remote(path, version), "trainer")

    def submit_restore(self, path: str) -> Call:
        return Call(self.actors.trainer.load_checkpoint.remote(path), "trainer")

    # ---- results -----------------------------------------------------------------------------------
    def wait(self, handles: list[Call], timeout: float | None) -> list[Call]:
        by_ref = {c.ref: c for c in handles}
        ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=timeout)
        for ref in ready:  # done: its result is there, however long it queued behind other calls
            by_ref[ref].deadline = None
        return [by_ref[r] for r in ready]

    def result(self, handle: Call) -> Any:
        """What the call returned; a dead actor is an ``RlsimError`` naming it, a failed reload falls back
        (``submit_sync``)."""
        self._back(handle.ref)
        try:
            value = self._get(handle.ref, handle.role, handle.deadline)
            return handle.finish(value) if handle.finish else value
        except Exception as err:
            if handle.method != "sync":
                raise
            reason = self._sync.reload_failed(err)
            ref = self.actors.rollout.simulate_sync.remote(self._sync.simulated_s, reason)
            return self._get(ref, "rollout", handle.deadline)

    def results(self, handles: list[Call]) -> list[Any]:
        """Every call's result in the order they finish; a scoring or reference call whose actor died is sent
        again (up to ``max_attempts``); no call finishing within ``score_timeout_s`` fails the step."""
        pending = {c.ref: c for c in handles}
        failed_replicas: set[int] = set()
        out = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=self._score_timeout_s)
            if not done:  # a stalled actor must fail the step, not hang it
                raise self._stalled(list(pending.values()))
            c = pending.pop(done[0])
            self._back(c.ref)
            try:
                value = self._get(c.ref, c.role, None, fatal=False)
                out.append(c.finish(value) if c.finish else value)
            except ray.exceptions.RayActorError as err:
                if c.kind not in RESENT_COUNTER:
                    raise RlsimError(
                        f"the {c.role} actor died computing batch {c.batch} ({_cause(err)}); the critic holds "
                        "weights this run has trained, so it is not restarted: the step fails (rerun with --resume)"
                    ) from None
                retry = self._resend(c, err)
                failed_replicas |= {c.replica} if c.kind == "scorer" else set()
                pending[retry.ref] = retry
        self.faults["scorer_failures"] += len(failed_replicas)
        if any(c.kind == "scorer" for c in handles):  # every rollout was scored despite this step's faults
            self.faults["survived"] += self._injected_this_step
            self._injected_this_step = 0
        return out

    def _stalled(self, waiting: list[Call]) -> RlsimError:
        if all(c.kind == "scorer" for c in waiting):
            where = ", ".join(sorted({c.role for c in waiting}))
            return RlsimError(
                f"no scoring batch finished within {self._score_timeout_s:g} s ({len(waiting)} waiting on "
                f"{where}); the scorer stalls: check its runtime (e.g. the http server), or raise "
                "faults.score_timeout_s"
            )
        roles = " or ".join(sorted({c.role for c in waiting}))
        return RlsimError(
            f"no {roles} batch finished within {self._score_timeout_s:g} s ({len(waiting)} waiting); the actor "
            "stalls: raise faults.score_timeout_s or look at its log"
        )

    def _resend(self, c: Call, err: Exception) -> Call:
        """Send ``c`` again after a short back-off: a scoring batch to another replica when there is one (the
        router's pick without the dead one; with one replica, to it once Ray has restarted it), a reference batch
        to the restarted reference. A call refused while the actor restarts (``ActorUnavailableError``) is not
        counted as an attempt, up to ``RESTART_WAIT_S`` in all."""
        unavailable = isinstance(err, getattr(ray.exceptions, "ActorUnavailableError", ()))
        attempts = c.attempts + (0 if unavailable else 1)
        waited = time.monotonic() - (c.first_failure or time.monotonic())
        if attempts > self._max_attempts or waited > RESTART_WAIT_S:
            raise RlsimError(
                f"{'the ' if c.kind == 'reference' else ''}{c.role} failed {c.attempts} times on batch {c.batch} "
                f"({_cause(err)}); raise faults.score_attempts / faults.scorer_restarts, or look at its log for "
                "why it dies"
            ) from None
        self.faults[RESENT_COUNTER[c.kind]] += 1
        retry = Call(None, c.role, method=c.method, rollouts=c.rollouts, batch=c.batch, replica=c.replica)
        retry.attempts, retry.retries = attempts, c.retries + 1
        retry.first_failure = c.first_failure or time.monotonic()
        if c.kind == "reference":
            time.sleep(min(2.0, 0.1 * 2 ** min(attempts, 5)))
            retry.ref = self.actors.reference.ref_logprobs.remote(c.rollouts, c.batch)
            return retry
        self._note_finished()
        retry.replica = self.router.pick(exclude={c.replica})
        if retry.replica == c.replica:  # no other replica: wait for Ray to restart this one
            time.sleep(min(2.0, 0.1 * 2 ** min(c.retries, 5)))
        retry.role = f"scorer-{retry.replica}"
        retry.ref = self.actors.scorers[retry.replica].score.remote(c.rollouts, c.batch)
        self._sent(retry.ref, retry.replica, len(c.rollouts), resent=True)
        return retry

    # ---- around the steps --------------------------------------------------------------------------
    def warmup(self, requests: Sequence[RolloutRequest]) -> None:
        """One small generate, a score on every replica, a reference and a values call where the run has them,
        and a trainer forward: first-call costs out of step 1."""
        deadline = self._timeouts.start("warmup")
        rollouts, _ = self.result(self.submit_generate(requests, deadline=deadline))
        calls = [(f"scorer-{i}", s.score.remote(rollouts, -1)) for i, s in enumerate(self.actors.scorers)]
        if self.uses_reference:
            calls.append(("reference", self.actors.reference.ref_logprobs.remote(rollouts, -1)))
        if self.uses_critic:
            calls.append(("critic", self.actors.critic.values.remote(rollouts, -1)))
        for role, ref in calls:
            self._get(ref, role, deadline)
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

    def close(self) -> None:
        pass  # the actors belong to the session that made them

    def _get(self, ref: Any, role: str, deadline: Deadline | None, fatal: bool = True) -> Any:
        """``ray.get`` until ``deadline`` (None: no limit, ``ref`` is known to be ready or has its own wait) with
        the worker's own ``RlsimError`` re-raised as is; a dead actor is an ``RlsimError`` when ``fatal``, else its
        ``RayActorError`` propagates (the caller re-sends)."""
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
