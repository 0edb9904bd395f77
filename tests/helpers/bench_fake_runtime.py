"""A test-only runtime, registered only when this module is imported (tests, or RLSIM_PLUGINS in workers).

Its reward is a known function of the text (word count / 1000) and its token length is the word
count + 2 (the synthetic workloads use single-token words plus [CLS]/[SEP]), so a benchmark run with
it can be checked exactly and runs in a second instead of loading a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlsim.scoring.base import ScorerStats, register_scorer

NAME = "fake-words"


def reward_of(text: str) -> float:
    return len(text.split()) / 1000.0


@register_scorer(NAME)
class FakeWordsScorer:
    name = NAME

    def __init__(self, model, settings) -> None:  # noqa: ANN001 - same signature as real scorers
        self.stats = ScorerStats()
        self.max_length = model.max_length

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [min(len(t.split()) + 2, self.max_length) for t in texts]

    def score_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.stats.batches += 1
        return np.array([reward_of(t) for t in texts], dtype=np.float32)

    def close(self) -> None:
        pass
