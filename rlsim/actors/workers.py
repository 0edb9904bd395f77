"""The three loop roles as process-level workers: pinned, timed, accounted. Plain Python, no Ray.

Each worker pins its process to its cores, builds its inner object (a ``Generator``, a
``RewardStage``, a ``PolicyTrainer``) from a picklable factory, and returns an ``Event`` for every
piece of work so the driver can build the step timeline. ``rlsim.actors.ray_actors`` turns these
classes into Ray actors; tests use them in-process with doubles as inner objects.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlsim.actors.pinning import pin_process, process_tree_cpu_seconds, set_thread_env
from rlsim.actors.server_faults import ServerFault, server_fault
from rlsim.errors import RlsimError
from rlsim.placement import ResolvedPlacement
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Event, Rollout, RolloutRequest
from rlsim.rollout.weights import WeightsFolder, state_nbytes
from rlsim.scoring.base import ServerScorer


class _Worker:
    def __init__(self, name: str, placement: ResolvedPlacement | None, pin: bool = True) -> None:
        t0 = time.perf_counter()
        self.name = name
        self.placement = placement
        self.cores: list[int] = sorted(os.sched_getaffinity(0))
        if placement is not None:
            set_thread_env(placement.threads)
            if pin:
                self.cores = pin_process(placement.cores)
        self._gpu = placement.gpu if placement else 0.0
        self._started = t0

    def _event(self, phase: str, batch: int, start: float, end: float, items: int = 0) -> Event:
        return Event(self.name, phase, batch, start, end, list(self.cores), self._gpu, items)

    def ready(self) -> dict[str, Any]:
        """Where this worker runs and how long it took to start (seconds)."""
        return {
            "name": self.name,
            "host": socket.gethostname(),
            "node": _ray_node_id(),
            "pid": os.getpid(),
            "cores": self.cores,
            "gpu": self._gpu,
            "start_s": self._start_s,
        }

    def cpu_seconds(self) -> tuple[int, float]:
        """(pid, CPU seconds used so far by this process and its children, e.g. vLLM's engine processes)."""
        return os.getpid(), process_tree_cpu_seconds()

    def _mark_started(self) -> None:
        self._start_s = time.perf_counter() - self._started


def _ray_node_id() -> str | None:
    """The Ray node this process belongs to, if it runs inside Ray (several "nodes" can share a host)."""
    if "ray" not in sys.modules:
        return None
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


class RolloutWorker(_Worker):
    """Holds the generator; also the weight-sync target (reload, or a simulated cost).

    With ``async.partial_rollouts`` new weights arrive through ``offer_weights``, which Ray runs in its own
    concurrency group (a thread beside the one running ``generate``): while a ``generate(..., start_version)``
    call is under way the offer waits until the generator takes the weights between engine steps (the
    worker is its ``SwapPoint``); with the engine idle the offer loads them itself. Either way the engine
    is only ever driven by one thread at a time, and ``version`` is the policy version it holds.
    """

    def __init__(self, name: str, placement: ResolvedPlacement | None, make: Callable[[], Any], pin: bool = True):
        super().__init__(name, placement, pin)
        self.generator = make()
        self._made_by = getattr(make, "args", None)  # rlsim.loop.roles.build's partial: (backend, policy, settings)
        self._weights = WeightsFolder()
        self.version = 0
        self._swap = threading.Condition()
        self._generating = False
        self._load_error: str | None = None  # a failed load of offered weights (a waiting generate call raises it)
        self._closing = False
        self._offered: tuple[Path, int] | None = None
        self._taken: tuple[SyncResult, list[Event]] | None = None
        self._pauses: list[tuple[float, float]] = []  # weight loads inside the current generate call
        self._mark_started()

    def ready(self) -> dict[str, Any]:
        return {**super().ready(), "backend": getattr(self.generator, "name", type(self.generator).__name__)}

    def made_by(self) -> tuple[Any, ...] | None:
        """The factory arguments this worker's generator was built from (``rlsim.loop.roles.build.factories``:
        backend, policy, ``GeneratorSettings``), so a session borrowing it can check it is the one it needs."""
        return self._made_by

    def generate(
        self, requests: Sequence[RolloutRequest], start_version: int | None = None
    ) -> tuple[list[Rollout], list[Event]]:
        """Rollouts and their events. ``start_version`` (partial rollouts): the call first waits until that
        version is loaded (its ``offer_weights`` was sent before this call, as a plain reload would have been
        queued before it); weights offered meanwhile are loaded between engine steps, each rollout records
        the versions that sampled it, and the generate event is split around each pause."""
        if start_version is None:
            t0 = time.time()
            rollouts = self.generator.generate(requests)
            return rollouts, [self._event("generate", 0, t0, time.time(), len(rollouts))]
        with self._swap:
            while self.version < start_version:
                if self._load_error or self._closing:
                    raise RlsimError(
                        f"{self.name}: the weights of policy version {start_version} never reached the engine "
                        f"({self._load_error or 'the worker is closing'})"
                    )
                self._swap.wait()
            self._generating, self._pauses, start = True, [], self.version
        t0 = time.time()
        try:
            rollouts = self.generator.generate(requests, swap=self)
        finally:
            with self._swap:
                self._generating = False
                self._swap.notify_all()
        for r in rollouts:
            r.version_spans = _spans([(start, 0), *(r.version_spans or [])], len(r.response_ids))
        cuts = [t0] + [t for pause in self._pauses for t in pause] + [time.time()]
        pieces = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2)]
        events = [self._event("generate", 0, a, b) for a, b in pieces]
        events[-1].items = len(rollouts)
        return rollouts, events

    def generating(self) -> bool:
        """Whether a ``generate(..., start_version)`` call is under way: weights offered now would load
        between its engine steps (ask it in the weights' concurrency group, as it runs beside that call)."""
        with self._swap:
            return self._generating

    def pending(self) -> tuple[Path, int] | None:
        """``SwapPoint``: the weights an ``offer_weights`` call waits to have loaded, if any."""
        with self._swap:
            return self._offered

    def swapped(self, result: SyncResult, start: float, end: float) -> None:
        """``SwapPoint``: the generator loaded the offered weights (from ``start`` to ``end``)."""
        with self._swap:
            assert self._offered is not None
            self.version = self._offered[1]
            result.detail += "; between engine steps of a generate call"
            self._taken = (result, [self._event("sync", 0, start, end)])
            self._pauses.append((start, end))
            self._offered = None
            self._swap.notify_all()

    def offer_weights(self, state: dict[str, Any], version: int) -> tuple[SyncResult, list[Event]]:
        """Policy ``version``'s weights: written to the worker's folder at once, then loaded between two engine
        steps of the generate call under way (or now, with the engine idle); returns when they are loaded."""
        folder = self._weights.write(state)
        with self._swap:
            self._offered = (folder, version)
            while self._offered is not None and self._generating:
                self._swap.wait()
            if self._offered is None:  # the generate call under way took them between engine steps
                assert self._taken is not None
                (result, events), self._taken = self._taken, None
            else:  # no generate call under way: load here, none can start meanwhile
                try:
                    result, events = self._load(folder, time.time())
                except BaseException as err:
                    self._load_error = f"loading version {version} failed: {err}"
                    raise
                finally:
                    self._offered = None  # a failed load is not offered again to the next generate call
                    self._swap.notify_all()  # a generate call may wait for this version
                self.version = version
                result.detail += "; the engine was idle"
        result.detail += f"; {state_nbytes(state) / 2**20:.1f} MiB"
        return result, events

    def new_pipeline(self) -> None:
        """An async pipeline starts on this worker: the weights the engine holds are its version 0 (versions
        count one pipeline's updates; the contention experiment runs several pipelines on one worker)."""
        with self._swap:
            self.version, self._load_error = 0, None

    def stop_waiting(self) -> None:
        """Fail a generate call that waits for weights which will not come (the run is being torn down)."""
        with self._swap:
            self._closing = True
            self._swap.notify_all()

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[tuple[list[Rollout], Event]]:
        """Yield (micro-batch, event) as rollouts finish; event k spans the generation since batch k-1."""
        t0 = time.time()
        for k, batch in enumerate(self.generator.stream(requests, micro_batch)):
            t1 = time.time()
            yield batch, self._event("generate", k, t0, t1, len(batch))
            t0 = time.time()  # time spent suspended in yield is not generation

    def load_weights(self, state: dict[str, Any]) -> tuple[SyncResult, list[Event]]:
        """Write ``state`` and load it into the engine, after the current call (the write is in the pause)."""
        t0 = time.time()
        result, events = self._load(self._weights.write(state), t0)
        result.detail += f"; {state_nbytes(state) / 2**20:.1f} MiB"
        return result, events

    def _load(self, folder: Path, t0: float) -> tuple[SyncResult, list[Event]]:
        """The engine loads the weights in ``folder``; its ``sync`` event spans ``t0`` to now."""
        result = self.generator.load_weights(Path(folder))
        return result, [self._event("sync", 0, t0, time.time())]

    def simulate_sync(self, seconds: float, reason: str = "configured") -> tuple[SyncResult, list[Event]]:
        """Block for ``seconds``, as a real weight sync would block generation."""
        t0 = time.time()
        time.sleep(seconds)
        return SyncResult("simulated", seconds, reason), [self._event("sync", 0, t0, time.time())]

    def close(self) -> None:
        self.generator.close()
        self._weights.close()


def _spans(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    """(version, first token) spans of a ``length``-token response with the empty ones gone: a swap before a
    request's first token makes the new version its first, one after its last token is no span of it."""
    out: list[tuple[int, int]] = []
    for version, first in spans:
        if out and first >= length:
            break
        if out and out[-1][1] == first:
            out.pop()
        out.append((version, first))
    return out


class ScoringWorker(_Worker):
    """Holds a ``RewardStage`` (runtime + batcher, its ``scorer`` a ``Scorer``); one per scoring replica."""

    def __init__(self, name: str, placement: ResolvedPlacement | None, make: Callable[[], Any], pin: bool = True):
        super().__init__(name, placement, pin)
        self.stage = make()
        self._mark_started()

    def ready(self) -> dict[str, Any]:
        scorer = self.stage.scorer  # None for a stage without a runtime (test doubles)
        return {**super().ready(), "runtime": scorer.name if scorer is not None else None}

    def score(
        self, rollouts: Sequence[Rollout], batch: int, fault: ServerFault | None = None
    ) -> tuple[dict[int, float], list[Event]]:
        """Rewards by uid and the score event; ``fault`` (injected on purpose) hits the http runtime's
        server just before this batch is scored."""
        t0 = time.time()
        with server_fault(self.stage.scorer, fault):
            rewards = self.stage.score(rollouts)
        event = self._event("score", batch, t0, time.time(), len(rollouts))
        event.outcomes = dict(getattr(self.stage, "last_outcomes", {}))  # a test double's stage may lack it
        return rewards, [event]

    def server_pid(self) -> int | None:
        """Pid of the scoring server behind an ``http`` runtime (None for in-process runtimes)."""
        scorer = self.stage.scorer
        return scorer.server_pid if isinstance(scorer, ServerScorer) else None

    def close(self) -> None:
        self.stage.close()


class TrainerWorker(_Worker):
    """Holds the ``PolicyTrainer``: the GRPO update and the export of weights for the sync."""

    def __init__(self, name: str, placement: ResolvedPlacement | None, make: Callable[[], Any], pin: bool = True):
        super().__init__(name, placement, pin)
        self.trainer = make()
        self._experience: tuple[list[Rollout], dict[int, float], Any] | None = None
        self._mark_started()

    def train(self, rollouts: Sequence[Rollout], rewards: dict[int, float]) -> tuple[dict[str, Any], list[Event]]:
        t0 = time.time()
        stats = self.trainer.train_step(rollouts, rewards)
        return stats.as_dict(), [self._event("update", 0, t0, time.time(), len(rollouts))]

    def experience(
        self, rollouts: Sequence[Rollout], rewards: dict[int, float], ref_logprobs: Any = None, values: Any = None
    ) -> tuple[dict[int, Any] | None, list[Event]]:
        """The advantages phase of a step with a reference or a critic: the experience is kept here for
        ``update_actor``; returns ppo's returns per uid (the critic's targets; None without a critic)."""
        t0 = time.time()
        self._experience = (list(rollouts), rewards, self.trainer.experience(rollouts, rewards, ref_logprobs, values))
        returns = self._experience[2].returns
        return returns, [self._event("advantages", 0, t0, time.time(), len(rollouts))]

    def update_actor(self) -> tuple[dict[str, Any], list[Event]]:
        """The policy update from the experience ``experience`` kept (raises if there is none)."""
        if self._experience is None:
            raise RuntimeError("update_actor before experience: the step's advantages were never computed")
        t0 = time.time()
        rollouts, rewards, exp = self._experience
        self._experience = None
        stats = self.trainer.update(rollouts, exp)
        scores = [float(rewards[x.uid]) for x in rollouts]
        stats.reward_mean, stats.reward_std = float(np.mean(scores)), float(np.std(scores))
        stats.seconds = time.time() - t0
        return stats.as_dict(), [self._event("update_actor", 0, t0, time.time(), len(rollouts))]

    def warmup(self, rollouts: Sequence[Rollout]) -> None:
        self.trainer.warmup(rollouts)

    def export_weights(self) -> tuple[dict[str, Any], Event]:
        t0 = time.time()
        state = self.trainer.export_weights()
        return state, self._event("sync", 0, t0, time.time())

    def save_checkpoint(self, path: str, version: int) -> list[Event]:
        """The trainer's state after update ``version`` into ``path`` (schedule async keeps one for --resume)."""
        t0 = time.time()
        self.trainer.save_checkpoint(path, version)
        return [self._event("checkpoint", 0, t0, time.time())]

    def load_checkpoint(self, path: str) -> tuple[int, list[Event]]:
        """Restore the state ``save_checkpoint`` wrote; returns the policy version it holds."""
        t0 = time.time()
        version = self.trainer.load_checkpoint(path)
        return version, [self._event("checkpoint", 0, t0, time.time())]

    def close(self) -> None:
        self.trainer.close()
