"""Score many texts with any scorer and any offline batcher; each reward lands at its request's index."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rlsim.batching.base import Batcher, check_plan, plan_stats

if TYPE_CHECKING:
    from rlsim.scoring.base import Scorer


@dataclass
class BatchReport:
    """What one ``score_texts`` call did.

    ``padded_tokens`` = sum over batches of longest x count (from the planned lengths; a runtime
    that pads further, e.g. ``compile`` to its buckets, computes more than this). Times in seconds.
    """

    batcher: str
    sequences: int = 0
    batches: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    batch_latencies_s: list[float] = field(default_factory=list)
    lengths_s: float = 0.0
    total_s: float = 0.0

    @property
    def padding_waste(self) -> float:
        """Padding tokens / all computed tokens, 0.0 (none) to <1.0."""
        if self.padded_tokens == 0:
            return 0.0
        return (self.padded_tokens - self.real_tokens) / self.padded_tokens

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, padding_waste=self.padding_waste)


def token_lengths(scorer: Scorer, texts: Sequence[str]) -> list[int]:
    """Tokens per text as the scorer will see them: its own tokenizer, special tokens, truncation."""
    # The scorer reports untruncated lengths (it counts truncation); batches see at most max_length.
    return [min(int(n), scorer.max_length) for n in scorer.token_lengths(texts)]


def score_texts(
    scorer: Scorer,
    texts: Sequence[str],
    batcher: Batcher,
    lengths: Sequence[int] | None = None,
) -> tuple[np.ndarray, BatchReport]:
    """Score ``texts`` in the batches ``batcher`` plans; returns float32 rewards ``(n,)`` in input order.

    ``lengths`` (tokens per text) is computed with the scorer's tokenizer when not given; that
    time is part of ``total_s`` and reported as ``lengths_s``.
    """
    t0 = time.perf_counter()
    if lengths is None:
        lengths = token_lengths(scorer, texts)
    if len(lengths) != len(texts):
        raise ValueError(f"{len(lengths)} lengths for {len(texts)} texts")
    lengths_s = time.perf_counter() - t0
    plan = batcher.plan(lengths)
    check_plan(plan, len(texts))
    stats = plan_stats(plan, lengths)
    report = BatchReport(
        batcher.describe(), stats.sequences, stats.batches, stats.real_tokens, stats.padded_tokens, lengths_s=lengths_s
    )
    rewards = np.empty(len(texts), dtype=np.float32)
    for batch in plan:
        tb = time.perf_counter()
        out = np.asarray(scorer.score_batch([texts[i] for i in batch]), dtype=np.float32).reshape(-1)
        report.batch_latencies_s.append(time.perf_counter() - tb)
        if out.shape[0] != len(batch):
            raise RuntimeError(f"scorer returned {out.shape[0]} rewards for a batch of {len(batch)} texts")
        rewards[batch] = out
        report.batch_sizes.append(len(batch))
    report.total_s = time.perf_counter() - t0
    return rewards, report
