"""The ``async`` schedule: generation, scoring and training as concurrent pipelines within a staleness bound.

Policy version ``v`` is the number of updates done. The rollout worker generates one batch of prompts
per call, tagged with the last version sent to it (its calls run in the order they were sent, so the
tag is exact); each finished batch goes to the scoring replicas in calls of whole groups, each call to the
replica with the fewest calls outstanding (``rlsim.replica_router.least_outstanding``, as verl's reward router);
scored groups
wait in a ``StalenessBuffer``; the trainer takes the oldest complete groups within ``max_staleness``
(older ones are dropped and counted). After each update the weights are exported at once (ahead of
any later update) and loaded into the engine after its current generate call: the engine pauses for
the reload between calls, and the pause is in the timeline as the rollout worker's ``sync`` event
(with ``partial_rollouts``, during the call; below).

Generation may start batch ``i`` (counted net of dropped groups) once version ``i - max_staleness`` has
been sent to the engine and the buffer plus scoring in flight leave room for one more batch within
``queue_size`` (AReaL's ``max_head_offpolicyness`` and OpenRLHF's ``async_queue_size`` in one rule).
It stops once enough has been generated for the run's updates. A step ends when its update and the
weight sync after it are done (and the trainer's checkpoint of it, when ``settings.checkpoint`` names a
folder: queued right after the export, so it never waits behind a later update); the pipeline keeps
running in between. Every generated rollout ends trained once, dropped as stale once, or unfinished at
the end (``Ledger``).

``settings.partial_rollouts``: the weights reach the engine between two of its steps, during the
generate call under way (``RolloutWorker.offer_weights``), instead of after it; a generate call starts
once the version it is tagged with is loaded. Each rollout then records the versions that sampled it,
and its version here (for the bound, the queue and the histogram) is the oldest of them, so no token of
a trained rollout is older than the bound allows. A group's version is its members' oldest.

``first_version`` > 0 (``--resume``) restores that version's checkpoint into the trainer and the engine
before anything else runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rlsim.errors import RlsimError
from rlsim.loop.backends.protocol import Backend
from rlsim.loop.schedules.asynchronous.staleness import Ledger, ScoredGroup, StalenessBuffer, histogram_of
from rlsim.loop.schedules.asynchronous.types import AsyncSettings, AsyncStepOutcome, checkpoint_file
from rlsim.loop.schedules.dropped import dropped_count, dropped_uids
from rlsim.loop.schedules.step import Progress
from rlsim.replica_router import least_outstanding
from rlsim.rollout.generator import SyncResult
from rlsim.rollout.types import Event, Rollout, RolloutRequest

MakeRequests = Callable[[int], Sequence[RolloutRequest]]
__all__ = ["AsyncPipeline", "AsyncSettings", "AsyncStepOutcome"]


@dataclass
class _Update:
    """A finished update waiting for its weight load and (when kept) its checkpoint: then its step ends."""

    version: int  # the version it made
    batch: list[ScoredGroup]
    stats: dict[str, Any]
    update_end: float
    saved: bool  # its checkpoint is written (True when none is kept)
    sync: tuple[SyncResult, list[Event]] | None = None


@dataclass
class _Job:
    kind: str  # generate, score, train, sync, checkpoint; restore and load (--resume, before anything else)
    version: int = 0
    index: int = 0  # generate: the batch's number; train: the update's (labels the timeline events)
    seq: int = 0  # submission order: calls that finish together are handled in the order they were sent
    rollouts: list[Rollout] = field(default_factory=list)
    replica: int = -1  # score: the scorer replica it went to


class AsyncPipeline:
    """Runs the async schedule on ``backend``; ``next_step()`` returns each update's outcome in turn.
    ``keep_generated``: keep every rollout generated in ``generated`` (trained, dropped and unfinished alike)."""

    def __init__(
        self,
        backend: Backend,
        settings: AsyncSettings,
        make_requests: MakeRequests,
        clock: Callable[[], float] = time.time,
        keep_generated: bool = False,
    ) -> None:
        self.backend, self.settings, self._make, self._clock = backend, settings, make_requests, clock
        backend.start_pipeline(settings.partial_rollouts)
        self.generated: list[Rollout] | None = [] if keep_generated else None
        self.ledger = Ledger()
        self.buffer = StalenessBuffer(
            settings.group_size, settings.prompts_per_step, settings.max_staleness, self.ledger
        )
        self.version = settings.first_version  # updates done
        self.trained_tokens = 0  # response tokens handed to the trainer
        self.loaded = settings.first_version  # last version sent to the engine
        self.events: list[Event] = []
        self.queue_log: list[tuple[float, int]] = []
        self.start: float | None = None
        self.end: float | None = None
        self._jobs: dict[Any, _Job] = {}
        self._gen_batches = settings.first_batch
        self._submitted_groups = settings.first_version * settings.prompts_per_step  # as if those were trained
        self._trains = settings.first_version
        self._training: list[ScoredGroup] | None = None
        self._trained: list[_Update] = []  # awaiting their weight load (and checkpoint)
        self._done: list[AsyncStepOutcome] = []
        self._returned = settings.first_version
        self._seq = 0
        self._score_calls = 0
        self._calls_per_replica = [0] * backend.num_scorers
        self._window: dict[str, Any] = self._new_window(0.0)

    # ---- the event loop -------------------------------------------------------------------------
    def next_step(self, progress: Progress | None = None) -> AsyncStepOutcome:
        """Run until the next update and its weight sync are done; after the last, drain the pipeline."""
        if self.start is None:
            self.start = self._clock()
            self._window = self._new_window(self.start)
            if self.settings.first_version > 0:
                self._restore()
        if self._returned >= self.settings.steps:
            raise RlsimError(f"the async run has done its {self.settings.steps} steps")
        while not self._done:
            self._launch()
            self._handle_next()
            if progress:
                done = min(self._window["generated"], self.settings.batch)  # rollouts of this step so far
                progress("update" if self._training else "generate", done, self.settings.batch)
        outcome = self._done.pop(0)
        self._returned += 1
        if outcome.version == self.settings.steps:
            self._drain()
            self.end = outcome.end
        return outcome

    def unrecorded_trained(self) -> list[Rollout]:
        """Rollouts handed to an update whose step ``next_step`` has not returned yet (training, waiting for
        its weight load, or done but not taken): in flight, not trained, as far as the records go."""
        batches = [self._training or [], *(u.batch for u in self._trained)]
        return [r for b in batches for g in b for r in g.rollouts] + [r for o in self._done for r in o.rollouts]

    def _restore(self) -> None:
        """--resume: the trainer loads the stopped run's checkpoint, then the engine loads those weights;
        both calls queue ahead of any update or generation on their worker, so the first batch is
        generated by the restored version."""
        if self.settings.checkpoint is None:
            raise RlsimError("resuming an async run needs the trainer checkpoint of the stopped run")
        path = checkpoint_file(self.settings.checkpoint, self.version)
        self._submit(self.backend.submit_restore(path), _Job("restore", self.version))
        self._submit(self.backend.submit_sync(self.version), _Job("load", self.version))

    def _launch(self) -> None:
        s = self.settings
        if self._training is None and self._trains < s.steps:
            batch = self.buffer.take_batch(self.version)
            if batch is not None:
                rollouts = [r for g in batch for r in g.rollouts]
                self.ledger.mark_trained([r.uid for r in rollouts], self.version)
                self.trained_tokens += sum(len(r.response_ids) for r in rollouts)
                rewards = {u: v for g in batch for u, v in g.rewards.items()}
                job = _Job("train", self.version, rollouts=rollouts, index=self._trains)
                self._submit(self.backend.submit_train(rollouts, rewards), job)
                self._training, self._trains = batch, self._trains + 1
        if not any(j.kind == "generate" for j in self._jobs.values()) and self._want_more():
            starved = not any(j.kind in ("score", "train") for j in self._jobs.values())
            if self._ahead_ok() or starved:
                self._generate()
        self._note_queue()

    def _net_groups(self) -> int:
        """Groups generated or in flight that may still be trained (dropped ones do not count)."""
        dropped = len(self.ledger.dropped) // self.settings.group_size
        return self._submitted_groups - dropped

    def _want_more(self) -> bool:
        return self._net_groups() < self.settings.steps * self.settings.prompts_per_step

    def _ahead_ok(self) -> bool:
        s = self.settings
        if self._net_groups() > (self.loaded + s.max_staleness) * s.prompts_per_step:
            return False
        scoring = sum(len(j.rollouts) for j in self._jobs.values() if j.kind == "score")
        return self.buffer.queued + scoring + s.batch <= s.queue_size

    def _generate(self) -> None:
        s, k = self.settings, self._gen_batches
        requests = [replace(r, uid=k * s.batch + r.uid, group=k * s.prompts_per_step + r.group) for r in self._make(k)]
        self._gen_batches += 1
        self._submitted_groups += s.prompts_per_step
        self._submit(self.backend.submit_generate(requests, self.loaded), _Job("generate", self.loaded, index=k))

    def _submit(self, handle: Any, job: _Job) -> None:
        self._seq += 1
        job.seq = self._seq
        self._jobs[handle] = job

    def _handle_next(self) -> None:
        if not self._jobs:
            raise RuntimeError("the async pipeline has nothing in flight and no step to finish; this is a bug")
        done = self.backend.wait(list(self._jobs), timeout=self.settings.stall_s)
        if not done:
            kinds = sorted({j.kind for j in self._jobs.values()})
            raise RlsimError(
                f"no call finished within {self.settings.stall_s:g} s (waiting on {', '.join(kinds)}); "
                "a worker stalls; raise faults.generate_timeout_s if it is just slow"
            )
        for handle in sorted(done, key=lambda h: self._jobs[h].seq):
            job = self._jobs.pop(handle)
            getattr(self, f"_on_{job.kind}")(job, self.backend.result(handle))

    # ---- completions ------------------------------------------------------------------------------
    def _on_generate(self, job: _Job, result: tuple[list[Rollout], list[Event]]) -> None:
        rollouts, events = result
        self._record(events, job.index)
        self.ledger.generated(rollouts, job.version)
        if self.generated is not None:
            self.generated += rollouts
        self._window["generated"] += len(rollouts)
        groups: dict[int, list[Rollout]] = {}
        for r in rollouts:
            groups.setdefault(r.group, []).append(r)
        per_call = max(1, self.settings.micro_batch // self.settings.group_size)
        chunks = [sum(list(groups.values())[i : i + per_call], []) for i in range(0, len(groups), per_call)]
        for chunk in chunks:  # each to the replica with the fewest calls outstanding (rlsim.replica_router)
            replica = self._route()
            self._score_calls += 1
            self._calls_per_replica[replica] += 1
            call = self.backend.submit_score(replica, chunk, self._score_calls)
            self._submit(call, _Job("score", job.version, rollouts=chunk, replica=replica))

    def _route(self) -> int:
        """Least outstanding calls, ties to the fewest sent since the start, then the lowest index: the rule of
        verl's reward router, which the planner's simulation of this pipeline applies the same way."""
        n = self.backend.num_scorers
        outstanding = [0] * n
        for j in self._jobs.values():
            if j.kind == "score":
                outstanding[j.replica] += 1
        return least_outstanding(outstanding, self._calls_per_replica)

    def _on_score(self, job: _Job, result: tuple[dict[int, float], list[Event]]) -> None:
        rewards, events = result
        self._record(events)
        if set(rewards) != {r.uid for r in job.rollouts}:
            raise RuntimeError(f"a scoring call returned {len(rewards)} rewards for {len(job.rollouts)} rollouts")
        dropped_uids(rewards, dropped_count(events))  # every NaN is a reward the scorer dropped
        self.buffer.add(job.rollouts, rewards)
        self._window["scored"] += len(rewards)

    def _on_train(self, job: _Job, result: tuple[dict[str, Any], list[Event]]) -> None:
        stats, events = result
        self._record(events, job.index)
        if int(stats.get("sequences", -1)) != len(job.rollouts):
            raise RuntimeError(f"trainer used {stats.get('sequences')} rollouts of {len(job.rollouts)} sent")
        assert self._training is not None
        self.version += 1
        folder = self.settings.checkpoint
        end = max((e.end for e in events), default=self._clock())
        self._trained.append(_Update(self.version, self._training, stats, end, saved=folder is None))
        self._training = None
        self._submit(self.backend.submit_sync(self.version), _Job("sync", self.version))
        if folder is not None:  # queued on the trainer after the export and ahead of its next update
            path = checkpoint_file(folder, self.version)
            self._submit(self.backend.submit_checkpoint(path, self.version), _Job("checkpoint", self.version))
        self.loaded = self.version

    def _on_sync(self, job: _Job, result: tuple[SyncResult, list[Event]]) -> None:
        self._record(result[1])
        self._update(job.version).sync = result
        self._finish_steps()

    def _on_checkpoint(self, job: _Job, events: list[Event]) -> None:
        self._record(events)
        self._update(job.version).saved = True
        self._finish_steps()

    def _on_restore(self, job: _Job, result: tuple[int, list[Event]]) -> None:
        version, events = result
        self._record(events)
        if version != job.version:
            raise RlsimError(
                f"the trainer checkpoint in {self.settings.checkpoint} holds policy version {version}, but the run "
                f"being resumed finished {job.version} updates; it cannot continue: start a new run"
            )

    def _on_load(self, job: _Job, result: tuple[SyncResult, list[Event]]) -> None:
        self._record(result[1])

    def _update(self, version: int) -> _Update:
        return next(u for u in self._trained if u.version == version)

    def _finish_steps(self) -> None:
        """Each update whose weights are loaded (and saved) ends its step, in order."""
        while self._trained and self._trained[0].sync is not None and self._trained[0].saved:
            u = self._trained.pop(0)
            assert u.sync is not None
            sync, sync_events = u.sync
            now = self._clock()
            rollouts = [r for g in u.batch for r in g.rollouts]
            loads = [e.end for e in sync_events if e.actor.startswith("rollout")]
            w = self._window
            self._done.append(
                AsyncStepOutcome(
                    rollouts=rollouts,
                    rewards={uid: v for g in u.batch for uid, v in g.rewards.items()},
                    train=u.stats,
                    sync=sync,
                    events=w["events"],
                    start=w["start"],
                    end=now,
                    counts={"generated": w["generated"], "scored": w["scored"], "trained": len(rollouts)},
                    staleness=histogram_of(self.ledger.trained[r.uid] for r in rollouts),
                    version=u.version,
                    dropped_stale=self.ledger.stale - w["dropped_before"],
                    sync_latency_s=max(loads) - u.update_end if loads else None,
                )
            )
            self._window = self._new_window(now)

    def _drain(self) -> None:
        """Let calls still in flight finish (their rollouts end unfinished) so no worker is left busy."""
        while self._jobs:
            self._handle_next()
        self._note_queue()

    def _record(self, events: list[Event], index: int | None = None) -> None:
        for e in events:  # a generate call's batch number, an update's number: what the Gantt labels
            e.batch = e.batch if index is None else index
        self.events += events
        self._window["events"] += events

    def _new_window(self, start: float) -> dict[str, Any]:
        return {"start": start, "events": [], "generated": 0, "scored": 0, "dropped_before": self.ledger.stale}

    def _note_queue(self) -> None:
        t = self._clock() - (self.start or 0.0)
        if not self.queue_log or self.queue_log[-1][1] != self.buffer.queued:
            self.queue_log.append((round(t, 4), self.buffer.queued))
