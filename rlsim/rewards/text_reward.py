"""What the rewards that are no model share: no tokenizer, no truncation, and counts of calls that ended
otherwise than scored (``timeouts``, ``errors``, ...), which the loop puts in each step's record."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from rlsim.rewards.options import unanswered_reward
from rlsim.scoring.base import ScorerStats

NO_LIMIT = 1 << 30  # no truncation: a verifier reads the whole response


class TextReward:
    """Base of ``function`` and ``sandbox``: ``score_pairs`` is the reward; ``score_batch`` scores texts as
    responses to an empty prompt (``rlsim bench scoring``, ``rlsim score``)."""

    name = "text-reward"

    def __init__(self, on_timeout: str, default_reward: float) -> None:
        self.stats = ScorerStats()
        self.max_length = NO_LIMIT
        self._on_timeout, self._default = on_timeout, float(default_reward)
        self._outcomes: Counter[str] = Counter()

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Characters per text: there is no reward tokenizer; batchers only need the order of lengths."""
        return [len(t) for t in texts]

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        return self.score_pairs([""] * len(texts), texts)

    def score_pairs(self, prompts: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def take_outcomes(self) -> dict[str, int]:
        out, self._outcomes = dict(self._outcomes), Counter()
        return out

    def _timed_out(self, what: str, setting: str) -> float:
        """The reward of a call past its deadline (``on_timeout``), counted; or the step's error."""
        self._outcomes["timeouts"] += 1
        reward = unanswered_reward(self._on_timeout, self._default, what, setting)  # type: ignore[arg-type]
        if math.isnan(reward):
            self._outcomes["dropped"] += 1
        return reward

    def _count(self, rows: int, tokens: int) -> None:
        self.stats.batches += 1
        self.stats.sequences += rows
        self.stats.tokens += tokens
        self.stats.padded_tokens += tokens
