"""The four measured conditions, each on one runtime's step backend, each bracketed by pool snapshots.

Plain Python against the loop's ``Backend`` (Ray or in-process); every figure comes from the
actors' own event times and the pool accounting, never from the driver's clock alone.

- ``gen_alone``: the step's requests streamed in micro-batches, nothing else running.
- ``score_alone``: those same micro-batches queued on the scorer(s), nothing else running.
- ``together``: a full ``overlapped`` step (generate while scoring, update, weight sync); with the
  reference and the critic (PPO), the PPO step (each micro-batch to all three at once); under
  ``schedule: async``, a whole async pipeline (rlsim.experiment.asynchronous.condition).
- ``timeboxed``: for ``budget_s`` seconds, waves of requests stream from the generator and every
  micro-batch finished before the deadline goes to a scorer; rollouts whose scoring ended before the
  deadline count. The last wave is drained (never counted past the deadline): a Ray actor call
  cannot be cut short, and a cancelled vLLM request would only waste the same work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlsim.experiment.accounting import PoolAccountant, PoolTime
from rlsim.loop.backends.protocol import Backend
from rlsim.loop.outputs.records import breakdown, gpu_seconds, union_length
from rlsim.loop.schedules.ppo import run_ppo_step
from rlsim.loop.schedules.step import run_step
from rlsim.rollout.prompts import make_step_requests
from rlsim.rollout.types import Event, Rollout
from rlsim.workloads import WorkloadSpec

TIMEBOX_STEP_BASE = 100_000  # waves of time-boxed steps draw requests from their own step numbers
QUIET_CORES = 0.2  # the actors together busy on fewer cores than this: idle (Ray's own upkeep aside)
QUIET_WINDOW_S = 0.25  # how long they must stay under it (CPU counters tick in 0.01 s)
# Accounting groups whose core-seconds every measured figure carries; the reference and the critic
# only where they run (``roots`` names them), so a GRPO row keeps exactly the three it always had.
CORE_GROUPS = ("generate", "score", "update")
EXPERIENCE_GROUPS = ("reference", "critic")


@dataclass
class Measurement:
    """One measured condition: ``figures`` (seconds, tokens/s, core-seconds; names in capacity.py),
    the pool time between its snapshots and, for score_alone, nothing more."""

    condition: str
    runtime: str
    repeat: int
    step: int
    figures: dict[str, float]
    pool: PoolTime
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "runtime": self.runtime,
            "repeat": self.repeat,
            "step": self.step,
            "figures": {k: round(v, 6) for k, v in self.figures.items()},
            "pool": self.pool.as_dict(),
            **self.extra,
        }


@dataclass(frozen=True)
class Workload:
    """A step's work: ``prompts`` x ``group`` rollouts from ``spec``, streamed in ``micro_batch``es."""

    spec: WorkloadSpec
    prompts: int
    group: int
    micro_batch: int
    timebox_micro_batch: int
    budget_s: float


TogetherResult = tuple[dict[str, float], dict[str, Any], list[Event]]


class TogetherRun(Protocol):
    """The together condition's body for measured step ``step``: (figures, extra fields of the row,
    events). ``extra["updates"]`` > 1 says the run trained that many batches (async): the pool's
    core-seconds are then divided by it, so every figure stays per update."""

    def __call__(self, step: int) -> TogetherResult: ...


@dataclass(frozen=True)
class OverlappedTogether:
    """One ``overlapped`` step of ``work`` on ``backend``: GRPO's, or with ``experience`` the PPO step
    (rlsim.loop.schedules.ppo), whose reference and critic phases then appear in the figures too."""

    backend: Backend
    work: Workload
    experience: bool = False

    def __call__(self, step: int) -> TogetherResult:
        w = self.work
        requests = make_step_requests(w.spec, step, w.prompts, w.group)
        if self.experience:
            outcome = run_ppo_step(self.backend, "overlapped", requests, w.micro_batch)
        else:
            outcome = run_step(self.backend, "overlapped", requests, w.micro_batch)
        figures = together_figures(outcome.events, outcome.start, outcome.end, outcome.rollouts, outcome.phases)
        return figures, {"sync": outcome.sync.method}, outcome.events


def overlapped_together(config: Any, backend: Backend, work: Workload, experience: bool) -> TogetherRun:
    """The together condition of the step-by-step schedules (their ``SCHEDULES`` entry's ``together``): one
    overlapped step of ``work``, PPO's when the run has the ``experience`` roles. ``config``: the experiment's
    ``ContentionConfig`` (unused here)."""
    return OverlappedTogether(backend, work, experience)


class ConditionRunner:
    """Runs conditions for one runtime. ``roots``: accounting group -> actor pids (``generate``,
    ``score``, ``update``, ...), as ``PoolAccountant.between`` takes them. ``together``: the together
    condition's body (default: a GRPO overlapped step on ``backend``)."""

    def __init__(
        self,
        backend: Backend,
        accountant: PoolAccountant,
        roots: Mapping[str, Sequence[int]],
        work: Workload,
        runtime: str,
        repeat: int,
        settle_max_s: float = 0.0,
        together: TogetherRun | None = None,
    ) -> None:
        self.backend, self.accountant, self.roots, self.work = backend, accountant, dict(roots), work
        self.runtime, self.repeat, self.settle_max_s = runtime, repeat, settle_max_s
        self.together: TogetherRun = together or OverlappedTogether(backend, work)
        self._streamed: dict[int, list[list[Rollout]]] = {}
        # Every event measured, as trace spans (rlsim.metrics.trace): wall-clock seconds, one track per actor.
        self.spans: list[dict[str, Any]] = []

    def _trace(self, condition: str, step: int, events: Sequence[Event]) -> None:
        for e in events:
            self.spans.append(
                {
                    "track": e.actor,
                    "name": e.phase,
                    "start": e.start,
                    "end": e.end,
                    "args": {
                        "runtime": self.runtime,
                        "repeat": self.repeat,
                        "condition": condition,
                        "step": step,
                        "batch": e.batch,
                        "items": e.items,
                    },
                }
            )

    def _measure(
        self, condition: str, step: int, body: Callable[[], tuple[dict[str, float], dict[str, Any]]]
    ) -> Measurement:
        settle = self.settle()
        before = self.accountant.snapshot()
        figures, extra = body()
        pool = self.accountant.between(before, self.accountant.snapshot(), self.roots)
        updates = extra.get("updates", 1)
        groups = CORE_GROUPS + tuple(g for g in EXPERIENCE_GROUPS if g in self.roots)
        for group in groups:
            figures[f"{group}_core_s"] = pool.groups.get(group, 0.0) / updates
        return Measurement(condition, self.runtime, self.repeat, step, figures, pool, {**extra, **settle})

    def settle(self) -> dict[str, Any]:
        """Wait until the actors have gone idle, at most ``settle_max_s``; say how long it took.

        Idle: every accounting group's processes together below ``QUIET_CORES`` busy cores over one
        ``QUIET_WINDOW_S`` window. Returns ``{}`` when the wait is off, else ``settle_s`` and ``settled``
        (False: the deadline came first and the condition started anyway).
        """
        if self.settle_max_s <= 0:
            return {}
        t0 = time.monotonic()
        prev = self.accountant.snapshot()
        while True:
            time.sleep(QUIET_WINDOW_S)
            cur = self.accountant.snapshot()
            busy_core_s = sum(self.accountant.between(prev, cur, self.roots).groups.get(g, 0.0) for g in self.roots)
            quiet = busy_core_s < QUIET_CORES * max(cur.wall - prev.wall, 1e-9)
            waited = time.monotonic() - t0
            if quiet or waited >= self.settle_max_s:
                return {"settle_s": round(waited, 3), "settled": quiet}
            prev = cur

    def run(self, condition: str, step: int) -> Measurement:
        bodies = {
            "gen_alone": self._gen_alone,
            "score_alone": self._score_alone,
            "together": self._together,
            "timeboxed": self._timeboxed,
        }
        if condition == "score_alone" and step not in self._streamed:
            raise RuntimeError("score_alone scores the rollouts of gen_alone: run gen_alone for this step first")
        measurement = self._measure(condition, step, lambda: bodies[condition](step))
        if condition == "gen_alone":
            rollouts = measurement.figures["rollouts"]
            measurement.figures["gen_core_s_per_rollout"] = measurement.figures["generate_core_s"] / rollouts
        return measurement

    def _requests(self, step: int) -> list[Any]:
        w = self.work
        return make_step_requests(w.spec, step, w.prompts, w.group)

    def _gen_alone(self, step: int) -> tuple[dict[str, float], dict[str, Any]]:
        batches, events = [], []
        for batch, event in self.backend.stream(self._requests(step), self.work.micro_batch):
            batches.append(batch)
            events.append(event)
        self._streamed[step] = batches
        self._trace("gen_alone", step, events)
        tokens = sum(len(r.response_ids) for b in batches for r in b)
        gen_s = union_length((e.start, e.end) for e in events)
        return {
            "gen_s": gen_s,
            "gen_tokens": tokens,
            "gen_tokens_per_s": tokens / gen_s,
            "rollouts": sum(len(b) for b in batches),
        }, {}

    def _score_alone(self, step: int) -> tuple[dict[str, float], dict[str, Any]]:
        batches = self._streamed.pop(step)
        n = self.backend.num_scorers
        handles = [self.backend.submit_score(k % n, batch, k) for k, batch in enumerate(batches)]
        events = [e for _, evs in self.backend.results(handles) for e in evs]
        self._trace("score_alone", step, events)
        busy = sum(e.duration for e in events)
        rollouts = sum(len(b) for b in batches)
        return {"score_busy_s": busy, "rollouts": rollouts, "score_rollouts_per_s": rollouts / busy}, {}

    def _together(self, step: int) -> tuple[dict[str, float], dict[str, Any]]:
        figures, extra, events = self.together(step)
        self._trace("together", step, events)
        return figures, extra

    def _timeboxed(self, step: int) -> tuple[dict[str, float], dict[str, Any]]:
        w, n = self.work, self.backend.num_scorers
        start = time.time()
        deadline = start + w.budget_s
        gen_events: list[Event] = []
        handles: list[Any] = []
        wave = 0
        while time.time() < deadline:
            wave_step = TIMEBOX_STEP_BASE + 1000 * step + wave
            requests = make_step_requests(w.spec, wave_step, w.prompts, w.group)
            for batch, event in self.backend.stream(requests, w.timebox_micro_batch):
                gen_events.append(event)
                if event.end <= deadline:  # finished in time: scoring it may still count
                    handles.append(self.backend.submit_score(len(handles) % n, batch, len(handles)))
            wave += 1
        score_events = [e for _, evs in self.backend.results(handles) for e in evs]
        self._trace("timeboxed", step, gen_events + score_events)
        figures = timebox_counts(gen_events, score_events, deadline, w.budget_s)
        figures["overrun_s"] = time.time() - deadline
        return figures, {"waves": wave}


def together_figures(
    events: Sequence[Event], start: float, end: float, rollouts: Sequence[Rollout], phases: Sequence[str] = ()
) -> dict[str, float]:
    """Step time, its phases (``phases``: those beside the standard four, as ``records.breakdown``
    takes them), throughputs and how much scoring sits on the critical path.

    Scoring is on the critical path while it runs and generation does not (after generation ends,
    the update waits for the last score): ``score_exposed_s = |score U generate| - |generate|``.
    """
    times = breakdown(events, start, end, phases)
    spans = {p: [(max(e.start, start), min(e.end, end)) for e in events if e.phase == p] for p in ("generate", "score")}
    exposed = union_length(spans["generate"] + spans["score"]) - union_length(spans["generate"])
    tokens = sum(len(r.response_ids) for r in rollouts)
    busy = sum(e.duration for e in events if e.phase == "score")
    figures = {f"{k}_s": v for k, v in times.items()}
    figures.update(
        {
            "step_s": times["total"],
            "gen_s": times["generate"],
            "gen_tokens": tokens,
            "gen_tokens_per_s": tokens / times["generate"] if times["generate"] > 0 else 0.0,
            "rollouts": len(rollouts),
            "score_busy_s": busy,
            "score_rollouts_per_s": len(rollouts) / busy if busy > 0 else 0.0,
            "score_exposed_s": exposed,
            "score_critical_share": exposed / times["total"] if times["total"] > 0 else 0.0,
            # GPU-seconds (busy time x GPU share) of the scorers: the scoring cost on a GPU; 0 on CPU.
            "score_gpu_s": sum(v for a, v in gpu_seconds(events, start, end).items() if a.startswith("scorer")),
        }
    )
    return figures


def timebox_counts(
    gen_events: Sequence[Event], score_events: Sequence[Event], deadline: float, budget_s: float
) -> dict[str, float]:
    """Rollouts generated, and generated *and* scored, by ``deadline``; rates per hour of budget.

    A micro-batch counts when its event ended by the deadline (its rollouts finish together), and
    only micro-batches generated in time were sent to scoring, so scored implies generated.
    """
    generated = sum(e.items for e in gen_events if e.end <= deadline)
    scored = sum(e.items for e in score_events if e.end <= deadline)
    return {
        "budget_s": budget_s,
        "generated_in_budget": generated,
        "scored_in_budget": scored,
        "rollouts_per_hour": scored * 3600.0 / budget_s,
        "generated_per_hour": generated * 3600.0 / budget_s,
    }
