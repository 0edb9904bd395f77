"""The ``async`` schedule simulated: generation, scoring and training as pipelined stages with a queue,
a staleness bound and weight-sync pauses of the engine, rule for rule as ``rlsim.loop.schedules.asynchronous.pipeline``.

The planner may not import the loop, so the rules are restated here at group granularity (a scoring
call always holds whole groups, so a group is scored at once), and a test drives the loop's own
``AsyncPipeline`` on a virtual clock with the same stage times to check that both agree event for event:

- a scoring call goes to the replica with the fewest calls outstanding, ties to the fewest sent, then the
  lowest index (``rlsim.replica_router.least_outstanding``); calls ending at one instant are handled in the
  order they were sent, as the loop handles them;
- policy version ``v`` is the number of updates done; a generate call (one batch of
  ``prompts_per_step`` groups) is tagged with the last version sent to the engine;
- the trainer takes the oldest ``prompts_per_step`` complete groups within ``max_staleness`` once it is
  free, after dropping (and counting) every older one;
- generation runs one call at a time and may start batch ``i`` (net of dropped groups) once version
  ``i - max_staleness`` has been sent and the queue plus the scoring in flight leave room for one
  more batch within ``queue_size``; or when nothing else is in flight (the loop's "starved" rule);
- after an update the weights are sent at once; the engine loads them after its current call (the
  pause is a ``sync`` call on the rollout worker, of the profile's sync cost); a step ends when its
  update's sync is done. With ``partial_rollouts`` the sync goes ahead of the generate call under way
  (behind any sync already ahead of it), which pauses for it and then continues; the call keeps the
  version it started with, as the loop counts a rollout at its oldest version. The loop's resubmission
  after the swap recomputes the KV cache of the tokens sampled so far: a prefill this model leaves out.

Each worker (the rollout worker, every scorer replica, the trainer) runs its calls one at a time in the
order they were sent, as a Ray actor does. A call's cost is uncontended seconds of work; the worker's
speed while it runs comes from ``Speeds`` (contention between workers sharing cores), recomputed
whenever a call starts or ends, so speeds are piecewise constant between events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rlsim.replica_router import least_outstanding

ROLLOUT, TRAINER = "rollout", "trainer"


class StageCosts(Protocol):
    """Uncontended seconds of each call. Groups are numbered globally: batch ``k`` holds groups
    ``k x prompts_per_step`` to ``(k + 1) x prompts_per_step - 1``."""

    def generate_s(self, batch: int) -> float: ...

    def score_s(self, groups: Sequence[int]) -> float: ...

    def update_s(self, groups: Sequence[int]) -> float: ...

    def sync_s(self, groups: Sequence[int]) -> float: ...


# The phase each busy worker runs (``generate``, ``sync``, ``score``, ``update``) -> its speed (1.0: uncontended).
Speeds = Callable[[Mapping[str, str]], Mapping[str, float]]


def uncontended(running: Mapping[str, str]) -> Mapping[str, float]:
    """Every worker at full speed (each on cores of its own)."""
    return dict.fromkeys(running, 1.0)


@dataclass(frozen=True)
class PipelineShape:
    """``steps``: updates in the run; ``micro_batch``: rollouts per scoring call (rounded to whole groups);
    ``queue_size``: scored rollouts the buffer may hold; ``scorers``: scoring replicas."""

    prompts_per_step: int
    group_size: int
    max_staleness: int
    queue_size: int
    steps: int
    micro_batch: int
    scorers: int
    partial_rollouts: bool = False

    @property
    def batch(self) -> int:
        return self.prompts_per_step * self.group_size


@dataclass
class _Call:
    worker: str
    phase: str  # generate, score, update, sync (the loop's event phases)
    work: float  # uncontended seconds still to do
    seq: int
    version: int = 0
    groups: list[int] = field(default_factory=list)
    start: float | None = None


@dataclass
class PipelineRun:
    """One simulated run. Times in seconds from the first generate call. ``step_ends[i]``: when update
    ``i + 1``'s sync finished; ``staleness[i]``: that update's rollouts per staleness; ``busy``: per
    worker ``(start, end, phase)`` of every call; ``totals``: every generated rollout's fate."""

    shape: PipelineShape
    step_ends: list[float]
    trained: list[list[int]]
    staleness: list[dict[int, int]]
    dropped: list[int]
    busy: dict[str, list[tuple[float, float, str]]]
    totals: dict[str, int]

    @property
    def end_s(self) -> float:
        return self.step_ends[-1]

    def histogram(self) -> dict[str, int]:
        """Trained rollouts per staleness over the run, ``{"0": n, "1": n, ...}`` as results.json has it."""
        total: Counter[int] = Counter()
        for s in self.staleness:
            total.update(s)
        return {str(k): v for k, v in sorted(total.items())}

    def mean_staleness(self) -> float:
        hist = {int(k): v for k, v in self.histogram().items()}
        return sum(k * v for k, v in hist.items()) / max(sum(hist.values()), 1)

    def rollouts_per_hour(self, first: int = 0, last: int | None = None) -> float:
        """Rollouts trained per hour by updates ``first + 1 .. last`` over their steps' wall time (default:
        the whole run, as results.json's ``async.rollouts_trained_per_hour``)."""
        last = len(self.step_ends) if last is None else last
        start = self.step_ends[first - 1] if first else 0.0
        trained = self.shape.batch * (last - first)
        return trained * 3600.0 / max(self.step_ends[last - 1] - start, 1e-12)

    def idle_fraction(self, worker: str) -> float:
        """Share of the run (0 .. end of the last step) in which ``worker`` ran nothing (verl's idle_ratio)."""
        spans = [(s, min(e, self.end_s)) for s, e, _ in self.busy.get(worker, []) if s < self.end_s]
        return 1.0 - union_of(spans) / max(self.end_s, 1e-12)


def union_of(spans: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by the ``(start, end)`` spans, overlaps counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


class AsyncSimulation:
    """Runs the rules of the module docstring on ``costs`` and ``speeds``; ``run()`` returns the run."""

    def __init__(self, shape: PipelineShape, costs: StageCosts, speeds: Speeds = uncontended) -> None:
        self.shape, self.costs, self.speeds = shape, costs, speeds
        self.now = 0.0
        self.version = 0  # updates done
        self.loaded = 0  # last version sent to the engine
        self._queues: dict[str, list[_Call]] = {}
        self._in_flight: list[_Call] = []  # sent and not yet handled, in the order sent
        self._seq = 0
        self._ready: list[tuple[int, int]] = []  # scored groups waiting: (version, group)
        self._versions: dict[int, int] = {}  # generated group -> its version
        self._gen_batches = self._submitted_groups = self._score_calls = self._trains = 0
        self._calls_per_scorer = [0] * shape.scorers
        self._training = False
        self._trained_groups: list[tuple[list[int], int]] = []  # awaiting their sync: (groups, version trained at)
        self._dropped_groups = 0
        self._dropped_at_step = 0
        self._out = PipelineRun(shape, [], [], [], [], {}, {})

    # ---- the driver's loop ----------------------------------------------------------------------
    def run(self) -> PipelineRun:
        while len(self._out.step_ends) < self.shape.steps:
            self._launch()
            self._handle_next()
        while self._in_flight:  # calls still running finish; their rollouts end unfinished
            self._handle_next()
        g = self.shape.group_size
        trained = sum(len(groups) for groups in self._out.trained) * g
        generated, dropped = len(self._versions) * g, self._dropped_groups * g
        self._out.totals = {
            "generated": generated,
            "trained": trained,
            "dropped_stale": dropped,
            "unfinished_at_end": generated - trained - dropped,
        }
        return self._out

    def _launch(self) -> None:
        s = self.shape
        if not self._training and self._trains < s.steps:
            batch = self._take_batch()
            if batch is not None:
                groups = [g for _, g in batch]
                self._send(TRAINER, "update", self.costs.update_s(groups), self.version, groups)
                self._training, self._trains = True, self._trains + 1
        generating = any(c.phase == "generate" for c in self._in_flight)
        if not generating and self._net_groups() < s.steps * s.prompts_per_step:
            starved = not any(c.phase in ("score", "update") for c in self._in_flight)
            if self._ahead_ok() or starved:
                self._generate()

    def _take_batch(self) -> list[tuple[int, int]] | None:
        """Drop the groups too old for the trainer, then the oldest full batch (staleness.StalenessBuffer)."""
        s = self.shape
        fresh = [(v, g) for v, g in self._ready if self.version - v <= s.max_staleness]
        self._dropped_groups += len(self._ready) - len(fresh)
        self._ready = sorted(fresh)
        if len(self._ready) < s.prompts_per_step:
            return None
        batch, self._ready = self._ready[: s.prompts_per_step], self._ready[s.prompts_per_step :]
        return batch

    def _net_groups(self) -> int:
        return self._submitted_groups - self._dropped_groups

    def _ahead_ok(self) -> bool:
        s = self.shape
        if self._net_groups() > (self.loaded + s.max_staleness) * s.prompts_per_step:
            return False
        scoring = sum(len(c.groups) for c in self._in_flight if c.phase == "score") * s.group_size
        return len(self._ready) * s.group_size + scoring + s.batch <= s.queue_size

    def _generate(self) -> None:
        s, k = self.shape, self._gen_batches
        groups = list(range(k * s.prompts_per_step, (k + 1) * s.prompts_per_step))
        self._gen_batches += 1
        self._submitted_groups += s.prompts_per_step
        self._send(ROLLOUT, "generate", self.costs.generate_s(k), self.loaded, groups)

    def _send(self, worker: str, phase: str, work: float, version: int, groups: list[int], ahead: bool = False) -> None:
        """Queue a call on ``worker``; ``ahead``: before the calls that are not syncs (partial rollouts)."""
        self._seq += 1
        call = _Call(worker, phase, max(work, 0.0), self._seq, version, groups)
        queue = self._queues.setdefault(worker, [])
        at = len(queue)
        if ahead:
            at = next((i for i, c in enumerate(queue) if c.phase != "sync"), len(queue))
        paused = queue[0] if at == 0 and queue else None
        if paused is not None and paused.start is not None:  # the call under way pauses: its busy span so far
            self._out.busy.setdefault(worker, []).append((paused.start, self.now, paused.phase))
            paused.start = None
        queue.insert(at, call)
        if at == 0:
            call.start = self.now
        self._in_flight.append(call)

    # ---- time ---------------------------------------------------------------------------------------
    def _handle_next(self) -> None:
        """Advance to the next time a call ends; handle every call ending then, in the order sent."""
        running = {w: q[0] for w, q in self._queues.items() if q}
        if not running:
            raise RuntimeError("the simulated async pipeline has nothing in flight; this is a bug")
        speed = self.speeds({w: c.phase for w, c in running.items()})
        dt = min(c.work / speed[w] for w, c in running.items())
        self.now += dt
        done = []
        for w, c in running.items():
            c.work -= dt * speed[w]
            if c.work <= 1e-12 * max(1.0, dt):
                done.append(c)
        for call in sorted(done, key=lambda c: c.seq):
            self._finish(call)

    def _finish(self, call: _Call) -> None:
        queue = self._queues[call.worker]
        queue.remove(call)  # not always the head: a sync may have gone ahead of it at this very instant
        if queue and queue[0].start is None:  # the next call, or one resuming after a sync went ahead of it
            queue[0].start = self.now
        if call.start is not None:  # None: paused at this very instant, its span already logged
            self._out.busy.setdefault(call.worker, []).append((call.start, self.now, call.phase))
        self._in_flight.remove(call)
        getattr(self, f"_on_{call.phase}")(call)

    # ---- completions ------------------------------------------------------------------------------
    def _on_generate(self, call: _Call) -> None:
        s = self.shape
        self._versions.update(dict.fromkeys(call.groups, call.version))
        per_call = max(1, s.micro_batch // s.group_size)
        for i in range(0, len(call.groups), per_call):  # each to the replica with the fewest calls outstanding
            chunk = call.groups[i : i + per_call]
            queued = [len(self._queues.get(f"scorer-{r}", [])) for r in range(s.scorers)]
            replica = least_outstanding(queued, self._calls_per_scorer)
            self._score_calls += 1
            self._calls_per_scorer[replica] += 1
            self._send(f"scorer-{replica}", "score", self.costs.score_s(chunk), call.version, chunk)

    def _on_score(self, call: _Call) -> None:
        self._ready += [(call.version, g) for g in call.groups]

    def _on_update(self, call: _Call) -> None:
        self.version += 1
        self._trained_groups.append((call.groups, call.version))
        self._training = False
        self._send(ROLLOUT, "sync", self.costs.sync_s(call.groups), self.version, [], ahead=self.shape.partial_rollouts)
        self.loaded = self.version

    def _on_sync(self, call: _Call) -> None:
        groups, trained_at = self._trained_groups.pop(0)
        staleness = Counter(trained_at - self._versions[g] for g in groups)
        run = self._out
        run.step_ends.append(self.now)
        run.trained.append(groups)
        run.staleness.append({k: v * self.shape.group_size for k, v in sorted(staleness.items())})
        run.dropped.append((self._dropped_groups - self._dropped_at_step) * self.shape.group_size)
        self._dropped_at_step = self._dropped_groups
