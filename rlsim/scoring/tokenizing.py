"""``TokenizingScorer``: the base of every in-process runtime (tokenize, truncate, pad, one tensor pass).

A subclass implements ``_forward(EncodedBatch) -> rewards`` and may pad further (``_pad_length``,
e.g. ``compile``'s buckets); callers use the public ``TokenScorer`` surface only: ``score_batch``,
``score_token_ids``, ``token_lengths``, ``max_length``, ``vocab_size``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rlsim.errors import RlsimError
from rlsim.scoring.base import ScorerSettings, ScorerStats

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec


@dataclass
class EncodedBatch:
    """Token ids for one batch, padded to a common length. Shapes ``(batch, seq)``, int64."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    real_tokens: int = 0
    truncated: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)  # type: ignore[return-value]


class TokenizingScorer:
    """Base for backends that tokenize with the reward model's tokenizer and run a tensor model."""

    name = "base"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        self.model = model
        self.settings = settings
        self.stats = ScorerStats()
        self.max_length = min(settings.max_length or model.max_length, model.max_length)
        self._tokenizer = load_reward_tokenizer(model, settings)

    @property
    def vocab_size(self) -> int:
        """Token ids must lie in ``[0, vocab_size)``."""
        return int(self.model.vocab_size)

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Untruncated length of each text in reward-model tokens (special tokens included)."""
        if not texts:
            return []
        return [len(ids) for ids in self._tokenizer(list(texts), add_special_tokens=True)["input_ids"]]

    def encode(self, texts: Sequence[str]) -> EncodedBatch:
        """Tokenize, truncate to ``max_length`` (counted), pad to the longest or the backend's bucket."""
        lengths = self.token_lengths(texts)
        truncated = sum(n > self.max_length for n in lengths)
        target = self._pad_length(min(max(lengths), self.max_length))
        enc = self._tokenizer(
            list(texts),
            padding="max_length",
            max_length=target,
            truncation=True,
            return_tensors="np",
        )
        ids = enc["input_ids"].astype(np.int64, copy=False)
        mask = enc["attention_mask"].astype(np.int64, copy=False)
        return EncodedBatch(ids, mask, real_tokens=int(mask.sum()), truncated=truncated)

    def encode_ids(self, rows: Sequence[Sequence[int]]) -> EncodedBatch:
        """Pre-tokenized rows -> a padded batch, cut to ``max_length`` by the truncation side (``left``
        keeps the end) and padded with the tokenizer's pad id on its padding side."""
        limit = self.max_length
        keep_end = self.settings.truncation == "left"
        kept = [list(r[-limit:]) if keep_end else list(r[:limit]) for r in rows]
        width = int(self._pad_length(max(len(r) for r in kept)))
        ids = np.full((len(kept), width), int(self._tokenizer.pad_token_id), dtype=np.int64)
        mask = np.zeros((len(kept), width), dtype=np.int64)
        pad_left = getattr(self._tokenizer, "padding_side", "right") == "left"
        for i, row in enumerate(kept):
            span = slice(width - len(row), width) if pad_left else slice(0, len(row))
            ids[i, span] = row
            mask[i, span] = 1
        truncated = sum(len(r) > limit for r in rows)
        return EncodedBatch(ids, mask, real_tokens=int(mask.sum()), truncated=truncated)

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0,), dtype=np.float32)
        check_texts(texts)
        return self._run(self.encode(texts))

    def score_token_ids(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, list[bool]]:
        """Score id rows in one forward pass: float32 rewards ``(len(rows),)`` and which rows were cut."""
        if len(rows) == 0:
            return np.zeros((0,), dtype=np.float32), []
        cut = [len(r) > self.max_length for r in rows]
        return self._run(self.encode_ids(rows)), cut

    def _run(self, batch: EncodedBatch) -> np.ndarray:
        rewards = self._forward(batch)
        self.stats.batches += 1
        self.stats.sequences += len(batch.input_ids)
        self.stats.tokens += batch.real_tokens
        self.stats.padded_tokens += int(batch.input_ids.size)
        self.stats.truncated += batch.truncated
        return np.asarray(rewards, dtype=np.float32).reshape(len(batch.input_ids))

    def _pad_length(self, longest: int) -> int:
        """Length to pad a batch whose longest text has ``longest`` tokens to (default: no extra padding)."""
        return longest

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass


def load_reward_tokenizer(model: RewardModelSpec, settings: ScorerSettings):
    """The reward model's tokenizer, set up for rlsim's own truncation (side from ``settings``)."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(model.path))
    tokenizer.truncation_side = settings.truncation
    # rlsim truncates (and counts) itself; stop the tokenizer warning about long raw texts.
    tokenizer.model_max_length = 1 << 30
    if tokenizer.pad_token_id is None:
        raise RlsimError(
            f"the tokenizer in {model.path} has no pad token; set one (tokenizer.pad_token = ...) and save it again"
        )
    return tokenizer


def check_texts(texts: Sequence[str]) -> None:
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise RlsimError(f"text {i} is {type(t).__name__}, not str; pass a list of strings")
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            # Unpaired surrogates (e.g. from a bad JSON decode) make the tokenizer raise TypeError.
            raise RlsimError(f"text {i} is not valid Unicode (unpaired surrogate); clean the input text") from None
