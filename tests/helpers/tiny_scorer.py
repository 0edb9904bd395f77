"""Runtimes registered for the server tests only: fast, deterministic, and controllable.

``test-tiny`` is a real ``TokenizingScorer`` (the MiniLM tokenizer, truncation, padding, stats)
whose "model" is arithmetic: reward = mean token id of the unpadded row / 1000. That does not
depend on padding or on which other rows share the batch, so a reward served over HTTP must equal
the direct one exactly. ``gate`` lets a test hold the model mid-batch (to fill the queue, force a
timeout, or shut down with work in flight); ``RLSIM_TINY_DELAY_S`` slows every batch for tests
that run the server as a separate process.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models.builtin import minilm_source_dir
from rlsim.models.reward import RewardModelSpec
from rlsim.scoring.base import ScorerSettings, ScorerStats, register_scorer
from rlsim.scoring.tokenizing import EncodedBatch, TokenizingScorer


def tiny_spec(max_length: int = 32) -> RewardModelSpec:
    """A spec around the MiniLM tokenizer folder (no weights are read: the model is arithmetic)."""
    return RewardModelSpec(
        name="tiny-test",
        path=minilm_source_dir(),
        arch="test",
        max_length=max_length,
        hidden_size=0,
        num_heads=0,
        num_layers=0,
        intermediate_size=0,
        vocab_size=30522,
    )


def mean_id_rewards(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(batch, seq) int64 ids and mask -> float32 (batch,): mean id of the real tokens / 1000."""
    return ((ids * mask).sum(axis=1) / mask.sum(axis=1) / 1000.0).astype(np.float32)


@register_scorer("test-tiny")
class TinyScorer(TokenizingScorer):
    name = "test-tiny"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        super().__init__(model, settings)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.batches: list[list[int]] = []  # first token id after [CLS] of each row, per batch
        self.padded_lengths: list[int] = []  # tokens per row of each batch (all rows padded to it)
        self.delay_s = float(os.environ.get("RLSIM_TINY_DELAY_S", "0"))

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        self.entered.set()
        if not self.gate.wait(60):
            raise RuntimeError("test gate never opened")
        if self.delay_s:
            time.sleep(self.delay_s)
        self.batches.append([int(row[1]) if len(row) > 1 else -1 for row in batch.input_ids])
        self.padded_lengths.append(int(batch.input_ids.shape[1]))
        return mean_id_rewards(batch.input_ids, batch.attention_mask)


@register_scorer("test-text-only")
class TextOnlyScorer:
    """A ``Scorer`` but not a ``TokenScorer``: reward = characters / 100, one "token" per character.
    Takes texts only (no token ids)."""

    name = "test-text-only"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        self.stats = ScorerStats()
        self.max_length = model.max_length

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [len(t) for t in texts]

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.stats.batches += 1
        return np.asarray([len(t) / 100.0 for t in texts], dtype=np.float32)

    def close(self) -> None:
        pass


@register_scorer("test-broken")
class BrokenScorer:
    """Fails to load, as a runtime with a missing model file would."""

    name = "test-broken"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        raise RlsimError("test-broken cannot load on purpose; this is what a load failure looks like")
