"""The async schedule's backend without Ray: each worker gets one thread (a Ray actor also runs one call
at a time), so generation, scoring and training really overlap in this process.

Used by the property tests (test doubles with random stage timings inside the real workers).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.loop.sync import WeightSync
from rlsim.rollout.types import Rollout, RolloutRequest


class ThreadedAsyncBackend:
    """``AsyncBackend`` over in-process workers; handles are ``concurrent.futures.Future``."""

    def __init__(
        self,
        rollout: RolloutWorker,
        scorers: list[ScoringWorker],
        trainer: TrainerWorker,
        sync: WeightSync,
        partial: bool = False,
    ) -> None:
        if not scorers:
            raise ValueError("at least one scoring worker is needed")
        self.rollout, self.scorers, self.trainer, self._sync = rollout, scorers, trainer, sync
        self.num_scorers, self._partial = len(scorers), partial
        if partial:
            rollout.new_pipeline()
        names = ["rollout", "rollout-weights", "trainer"] + [f"scorer-{i}" for i in range(len(scorers))]
        self._pools = {name: ThreadPoolExecutor(1, thread_name_prefix=name) for name in names}

    def submit_generate(self, requests: Sequence[RolloutRequest], version: int) -> Future:
        start = version if self._partial else None  # without partial rollouts the thread's queue keeps the order
        return self._pools["rollout"].submit(self.rollout.generate, list(requests), start)

    def submit_score(self, replica: int, rollouts: list[Rollout], batch: int) -> Future:
        return self._pools[f"scorer-{replica}"].submit(self.scorers[replica].score, rollouts, batch)

    def submit_train(self, rollouts: list[Rollout], rewards: dict[int, float]) -> Future:
        return self._pools["trainer"].submit(self.trainer.train, rollouts, rewards)

    def submit_sync(self, version: int) -> Future:
        """Export now (ahead of any later update on the trainer's thread), load after the rollout worker's
        current call (the same order a Ray actor's queue gives), or with partial rollouts offer them from the
        worker's second thread, as the Ray actor's ``weights`` concurrency group does."""
        if self._sync.mode == "simulated":
            return self._pools["rollout"].submit(
                self.rollout.simulate_sync, self._sync.simulated_s, "trainer.sync: simulated"
            )
        exported = self._pools["trainer"].submit(self.trainer.export_weights)

        def load() -> Any:
            state, export_event = exported.result()
            if self._partial:
                result, events = self.rollout.offer_weights(state, version)
            else:
                result, events = self.rollout.load_weights(state)
            return result, [export_event] + events

        return self._pools["rollout-weights" if self._partial else "rollout"].submit(load)

    def submit_checkpoint(self, path: str, version: int) -> Future:
        return self._pools["trainer"].submit(self.trainer.save_checkpoint, path, version)

    def submit_restore(self, path: str) -> Future:
        return self._pools["trainer"].submit(self.trainer.load_checkpoint, path)

    def wait(self, handles: list[Future], timeout: float | None) -> list[Future]:
        done, _ = wait(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        return list(done)

    def result(self, handle: Future) -> Any:
        return handle.result()

    def close(self) -> None:
        self.rollout.stop_waiting()  # a generate call waiting for weights that will not come fails instead
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
