"""The model side of the server: one scorer behind one dynamic batcher.

Requests become ``ScoreJob``s; the batcher groups jobs from many requests into one forward pass
(texts with texts, token-id rows with token-id rows) in its worker thread, so the event loop keeps
answering while the model runs. Rewards and truncation counts go back to each job's own future.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rlsim.batching.dynamic import DynamicBatcher, QueueFull
from rlsim.batching.fixed_size import SortedBatcher
from rlsim.batching.scoring import score_texts
from rlsim.errors import RlsimError
from rlsim.scoring.base import Scorer, TokenScorer

if TYPE_CHECKING:
    from rlsim.serve.settings import ServeSettings

WARMUP_TEXTS = ["warm-up", "a longer warm-up text, so the first real request does not pay for first-call set-up"]


@dataclass(eq=False)
class ScoreJob:
    """One request's inputs: exactly one of ``texts`` or ``token_ids`` is set."""

    texts: list[str] | None = None
    token_ids: list[list[int]] | None = None

    @property
    def size(self) -> int:
        """Sequences in this job (the batcher's size unit)."""
        return len(self.texts if self.texts is not None else self.token_ids or [])


@dataclass
class JobResult:
    rewards: list[float]
    truncated: int


class Overloaded(QueueFull):
    """The queue has room, but the work ahead would outlast the request's timeout: answer 503 now."""

    def __init__(self, wait_s: float, limit_s: float, queued: int, size: int, capacity: int) -> None:
        RlsimError.__init__(
            self,
            f"server overloaded: the estimated wait ({wait_s:.1f} s for {queued} queued sequences) exceeds the "
            f"{limit_s:g} s request timeout; retry later or send less load",
        )
        self.queued, self.size, self.capacity, self.wait_s = queued, size, capacity, wait_s


class ScoringBackend:
    """A scorer, its batcher and warm-up. ``on_batch(sequences, seconds)`` feeds metrics.

    ``max_delay_s`` (usually the request timeout) sheds load by time, not only by queue length: a
    job whose estimated wait exceeds it would time out anyway, after costing the client that long
    and, if it reached the model, costing everyone the forward pass. Rejecting it at once (503)
    keeps the accepted requests within their timeout when the server is past saturation.
    """

    EWMA_WEIGHT = 0.2  # weight of the newest batch in the seconds-per-sequence estimate

    def __init__(
        self,
        scorer: Scorer,
        *,
        max_batch_size: int,
        max_wait_s: float,
        max_queue: int,
        max_delay_s: float | None = None,
        on_batch: Callable[[int, float], None] | None = None,
        sub_batch_size: int = 0,
    ) -> None:
        self.scorer = scorer
        self.sub_batch_size = sub_batch_size
        self.warmup_s = 0.0
        self.max_delay_s = max_delay_s
        self._s_per_seq: float | None = None
        self._on_batch = on_batch
        self._batcher: DynamicBatcher[ScoreJob, JobResult] = DynamicBatcher(
            self._process,
            max_batch_size=max_batch_size,
            max_wait_s=max_wait_s,
            max_queue=max_queue,
            size_of=lambda job: job.size,
            on_batch=self._observe,
            name=f"rlsim-serve-{scorer.name}",
        )

    @classmethod
    def from_settings(
        cls, scorer: Scorer, settings: ServeSettings, on_batch: Callable[[int, float], None] | None = None
    ) -> ScoringBackend:
        """The backend ``rlsim serve`` runs for ``settings`` around ``scorer`` (its timeout caps queueing)."""
        return cls(
            scorer,
            max_batch_size=settings.max_batch_size,
            max_wait_s=settings.max_wait_s,
            max_queue=settings.max_queue,
            max_delay_s=settings.request_timeout_s,
            on_batch=on_batch,
            sub_batch_size=settings.sub_batch_size,
        )

    def _observe(self, sequences: int, seconds: float) -> None:
        if sequences > 0:
            per_seq = seconds / sequences
            old = self._s_per_seq
            self._s_per_seq = per_seq if old is None else old + self.EWMA_WEIGHT * (per_seq - old)
        if self._on_batch is not None:
            self._on_batch(sequences, seconds)

    def estimated_wait_s(self, extra_sequences: int = 0) -> float:
        """Seconds until the queued work (plus ``extra_sequences``) is scored, at the recent rate."""
        return (self._batcher.queued_size + extra_sequences) * (self._s_per_seq or 0.0)

    # ---- what the app asks -----------------------------------------------------------------------
    @property
    def vocab_size(self) -> int | None:
        """Token ids must lie in ``[0, vocab_size)``; None when the runtime takes texts only."""
        if not isinstance(self.scorer, TokenScorer):
            return None
        return int(self.scorer.vocab_size) or None  # 0: the model does not say, so ids cannot be checked

    @property
    def queued_sequences(self) -> int:
        return self._batcher.queued_size

    @property
    def queued_requests(self) -> int:
        return self._batcher.queued_items

    def retry_after_s(self) -> int:
        """Seconds a rejected client should wait: time to drain the queue at the recent rate (1..30)."""
        return int(min(30, max(1, math.ceil(self.estimated_wait_s()))))

    def warm_up(self) -> None:
        """One forward pass before the server reports ready, so first-call costs are not a request's."""
        t0 = time.perf_counter()
        self.scorer.score_batch(WARMUP_TEXTS)
        self.warmup_s = time.perf_counter() - t0

    def submit(self, job: ScoreJob) -> Future[JobResult]:
        """Queue a job; raises ``QueueFull``/``Overloaded`` (answer 503) or ``BatcherClosed`` (shutting down)."""
        queued = self._batcher.queued_size
        # An empty queue always admits: the estimate may be stale, and the job would run next anyway.
        if self.max_delay_s is not None and queued > 0:
            wait = self.estimated_wait_s(job.size)
            if wait > self.max_delay_s:
                raise Overloaded(wait, self.max_delay_s, queued, job.size, self._batcher.max_queue)
        return self._batcher.submit(job)

    def close(self, timeout_s: float | None = None) -> None:
        """Finish accepted jobs (up to ``timeout_s`` seconds), then release the model."""
        self._batcher.close(timeout_s)
        self.scorer.close()

    # ---- the batcher's worker thread ---------------------------------------------------------------
    def _process(self, jobs: list[ScoreJob]) -> list[JobResult]:
        results: dict[int, JobResult] = {}
        text_jobs = [(i, j) for i, j in enumerate(jobs) if j.texts is not None]
        row_jobs = [(i, j) for i, j in enumerate(jobs) if j.token_ids is not None]
        if text_jobs:
            results.update(zip([i for i, _ in text_jobs], self._score_texts([j for _, j in text_jobs]), strict=True))
        if row_jobs:
            results.update(zip([i for i, _ in row_jobs], self._score_rows([j for _, j in row_jobs]), strict=True))
        return [results[i] for i in range(len(jobs))]

    def _score_texts(self, jobs: list[ScoreJob]) -> list[JobResult]:
        flat = [t for job in jobs for t in job.texts or ()]
        before = self.scorer.stats.truncated
        if 0 < self.sub_batch_size < len(flat):
            # Sorted by length and cut into sub-batches: each pass pads only to its own longest text.
            rewards, _ = score_texts(self.scorer, flat, SortedBatcher(self.sub_batch_size))
        else:
            rewards = self.scorer.score_batch(flat)
        rewards = _checked(rewards, len(flat))
        batch_truncated = self.scorer.stats.truncated - before
        per_job = self._attribute_truncation(jobs, batch_truncated)
        return [JobResult(r, n) for r, n in zip(_split(rewards, jobs), per_job, strict=True)]

    def _attribute_truncation(self, jobs: list[ScoreJob], batch_truncated: int) -> list[int]:
        # Cheap in the common case (nothing truncated); only a mixed batch with truncation pays for
        # re-measuring lengths, so each request learns exactly how many of *its* texts were cut.
        if batch_truncated == 0:
            return [0] * len(jobs)
        if len(jobs) == 1:
            return [batch_truncated]
        limit = self.scorer.max_length
        return [sum(n > limit for n in self.scorer.token_lengths(job.texts or [])) for job in jobs]

    def _score_rows(self, jobs: list[ScoreJob]) -> list[JobResult]:
        rows = [row for job in jobs for row in job.token_ids or ()]
        assert isinstance(self.scorer, TokenScorer), "make_job admits token ids only for a TokenScorer"
        rewards, cut = self.scorer.score_token_ids(rows)
        per_job, start = [], 0
        for job in jobs:
            per_job.append(int(sum(cut[start : start + job.size])))
            start += job.size
        return [JobResult(r, n) for r, n in zip(_split(_checked(rewards, len(rows)), jobs), per_job, strict=True)]


def _checked(rewards: np.ndarray, n: int) -> np.ndarray:
    values = np.asarray(rewards, dtype=np.float32).reshape(-1)
    if values.shape != (n,):
        raise RuntimeError(f"the runtime returned {values.shape[0]} rewards for {n} inputs")
    if not np.all(np.isfinite(values)):
        # A server-side fault (bad weights), not the client's: surfaces as a 500.
        raise RuntimeError("the runtime returned a non-finite reward (NaN or inf); check the model's weights")
    return values


def _split(rewards: np.ndarray, jobs: list[ScoreJob]) -> list[list[float]]:
    out, start = [], 0
    for job in jobs:
        out.append([float(x) for x in rewards[start : start + job.size]])
        start += job.size
    return out
