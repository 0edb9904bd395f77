"""The backend without Ray: the workers called in this process.

Handles are ``concurrent.futures.Future``. By default each call runs when it is submitted and its future is
already done, so a step-by-step schedule runs one call after another, deterministically: the unit tests
(test doubles inside the real workers) and a debugger see the schedule's logic and nothing else. With
``threaded=True`` each worker gets one thread (a Ray actor also runs one call at a time), so generation,
scoring and training really overlap: the async schedule's property tests run on that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.loop.backends.protocol import PerUid
from rlsim.loop.sync import WeightSync
from rlsim.replica_router import ReplicaRouter
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Event, Rollout, RolloutRequest


class InProcessBackend:
    """``Backend`` over in-process workers; ``reference`` and ``critic`` are None when the run has no such role."""

    def __init__(
        self,
        rollout: RolloutWorker,
        scorers: list[ScoringWorker],
        trainer: TrainerWorker,
        sync: WeightSync,
        reference: Any = None,
        critic: Any = None,
        threaded: bool = False,
    ) -> None:
        if not scorers:
            raise ValueError("at least one scoring worker is needed")
        self.rollout, self.scorers, self.trainer, self._sync = rollout, scorers, trainer, sync
        self.reference, self.critic = reference, critic
        self.uses_reference, self.uses_critic = reference is not None, critic is not None
        self.num_scorers = len(scorers)
        self.router = ReplicaRouter(self.num_scorers)
        self._partial = False
        self._pools: dict[str, ThreadPoolExecutor] | None = None
        if threaded:
            names = ["rollout", "rollout-weights", "trainer", "reference", "critic"]
            names += [f"scorer-{i}" for i in range(len(scorers))]
            self._pools = {name: ThreadPoolExecutor(1, thread_name_prefix=name) for name in names}

    def _submit(self, worker: str, fn: Callable[..., Any], *args: Any) -> Future:
        """``fn(*args)`` on ``worker``'s thread, or here and now (its future already done)."""
        if self._pools is not None:
            return self._pools[worker].submit(fn, *args)
        done: Future = Future()
        try:
            done.set_result(fn(*args))
        except Exception as err:  # noqa: BLE001  (raised again by result(), as a worker thread's would be)
            done.set_exception(err)
        return done

    def start_pipeline(self, partial: bool) -> None:
        self._partial = partial
        if partial:
            self.rollout.new_pipeline()

    def submit_generate(self, requests: Sequence[RolloutRequest], version: int | None = None) -> Future:
        start = version if self._partial else None  # without partial rollouts the worker's queue keeps the order
        return self._submit("rollout", self.rollout.generate, list(requests), start)

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[tuple[list[Rollout], Event]]:
        return self.rollout.stream(requests, micro_batch)

    def submit_score(self, replica: int | None, rollouts: list[Rollout], batch: int) -> Future:
        chosen = self.router.pick() if replica is None else replica
        self.router.sent(chosen, len(rollouts))
        handle = self._submit(f"scorer-{chosen}", self.scorers[chosen].score, rollouts, batch)
        handle.add_done_callback(lambda _: self.router.finished(chosen))
        return handle

    def submit_reference(self, rollouts: list[Rollout], batch: int) -> Future:
        return self._submit("reference", self.reference.ref_logprobs, rollouts, batch)

    def submit_values(self, rollouts: list[Rollout], batch: int) -> Future:
        return self._submit("critic", self.critic.values, rollouts, batch)

    def submit_train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> Future:
        return self._submit("trainer", self.trainer.train, rollouts, rewards)

    def submit_experience(
        self, rollouts: list[Rollout], rewards: dict[int, float], ref_logprobs: PerUid | None, values: PerUid | None
    ) -> Future:
        return self._submit("trainer", self.trainer.experience, rollouts, rewards, ref_logprobs, values)

    def submit_update(self, rollouts: list[Rollout], returns: PerUid | None, values: PerUid | None) -> Future:
        def update() -> tuple[dict[str, Any], list[Event]]:
            train, events = self.trainer.update_actor()
            if self.critic is not None:
                stats, critic_events = self.critic.update_critic(rollouts, returns, values)
                train, events = {**train, "value_loss": stats["value_loss"]}, events + critic_events
            return train, events

        return self._submit("trainer", update)

    def submit_sync(self, version: int = 0) -> Future:
        """Export now (ahead of any later update on the trainer's thread), load after the rollout worker's
        current call (the order a Ray actor's queue gives), or with partial rollouts offer the weights from the
        worker's second thread, as the Ray actor's ``weights`` concurrency group does. A failed reload falls
        back to the simulated cost under ``trainer.sync: auto`` (``WeightSync``)."""
        reason = self._sync.simulate_reason()
        if reason is not None:
            return self._submit("rollout", self.rollout.simulate_sync, self._sync.simulated_s, reason)
        exported = self._submit("trainer", self.trainer.export_weights)
        partial = self._partial

        def load() -> tuple[SyncResult, list[Event]]:
            try:
                state, export_event = exported.result()
                if partial:
                    result, events = self.rollout.offer_weights(state, version)
                else:
                    result, events = self.rollout.load_weights(state)
            except Exception as err:  # noqa: BLE001  (WeightSync decides: fall back, or fail naming the setting)
                return self.rollout.simulate_sync(self._sync.simulated_s, self._sync.reload_failed(err))
            return result, [export_event] + events

        return self._submit("rollout-weights" if partial else "rollout", load)

    def submit_checkpoint(self, path: str, version: int) -> Future:
        return self._submit("trainer", self.trainer.save_checkpoint, path, version)

    def submit_restore(self, path: str) -> Future:
        return self._submit("trainer", self.trainer.load_checkpoint, path)

    def wait(self, handles: list[Future], timeout: float | None) -> list[Future]:
        done, _ = wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def result(self, handle: Future) -> Any:
        return handle.result()

    def results(self, handles: list[Future]) -> list[Any]:
        return [h.result() for h in handles]

    def cpu_seconds(self) -> dict[str, tuple[int, float]]:
        # One process: every worker would report the same total, so report it once.
        return {"in-process": self.rollout.cpu_seconds()}

    def close(self) -> None:
        self.rollout.stop_waiting()  # a generate call waiting for weights that will not come fails instead
        for pool in (self._pools or {}).values():
            pool.shutdown(wait=True, cancel_futures=True)
