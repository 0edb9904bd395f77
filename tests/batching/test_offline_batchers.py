"""Offline batchers: plans cover every request once, padding waste matches hand counts, scores go home."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlsim.batching import (
    BATCHERS,
    FixedBatcher,
    SortedBatcher,
    TokenBudgetBatcher,
    make_batcher,
    padding_waste,
    plan_stats,
    score_texts,
)
from rlsim.batching.base import check_plan
from rlsim.errors import RlsimError
from rlsim.scoring.base import ScorerStats


class WordScorer:
    """Test double: reward = the request id written in the text; length = words + 2 special tokens.

    It records every batch it was given, so tests can see which texts shared a forward pass.
    """

    name = "words"
    max_length = 512  # longer than any test text: nothing is truncated

    def __init__(self) -> None:
        self.stats = ScorerStats()
        self.batches: list[list[str]] = []

    def token_lengths(self, texts: list[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    def score_batch(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([float(t.split()[0].removeprefix("req")) for t in texts], dtype=np.float32)

    def close(self) -> None:
        pass


def make_texts(n: int, seed: int) -> tuple[list[str], list[float]]:
    """``n`` texts "reqK w w w ..." with random word counts, shuffled; returns texts and expected rewards."""
    rng = random.Random(seed)
    ids = list(range(n))
    rng.shuffle(ids)
    texts = [f"req{k} " + " ".join(["w"] * rng.randint(0, 40)) for k in ids]
    return texts, [float(k) for k in ids]


ALL = [FixedBatcher(3), SortedBatcher(3), TokenBudgetBatcher(100)]


@pytest.mark.parametrize("batcher", ALL, ids=lambda b: b.describe())
def test_every_score_returns_to_its_request(batcher) -> None:
    texts, expected = make_texts(50, seed=1)
    scorer = WordScorer()
    rewards, report = score_texts(scorer, texts, batcher)
    assert rewards.dtype == np.float32
    np.testing.assert_array_equal(rewards, np.array(expected, dtype=np.float32))
    assert report.sequences == 50 and sum(report.batch_sizes) == 50
    assert report.batches == len(scorer.batches) == len(report.batch_latencies_s)


def test_sorted_batches_hold_neighbouring_lengths() -> None:
    texts, _ = make_texts(30, seed=2)
    scorer = WordScorer()
    score_texts(scorer, texts, SortedBatcher(5))
    maxima = [max(len(t.split()) for t in b) for b in scorer.batches]
    minima = [min(len(t.split()) for t in b) for b in scorer.batches]
    # Batches come shortest first and never interleave: each batch starts at or above the last one's top.
    assert all(lo >= prev_hi for lo, prev_hi in zip(minima[1:], maxima[:-1], strict=True))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=512), max_size=80), st.integers(1, 16))
def test_plans_cover_each_index_once(lengths: list[int], size: int) -> None:
    for batcher in (FixedBatcher(size), SortedBatcher(size), TokenBudgetBatcher(512 * 2)):
        plan = batcher.plan(lengths)
        check_plan(plan, len(lengths))
        if isinstance(batcher, TokenBudgetBatcher):
            assert all(max(lengths[i] for i in b) * len(b) <= 1024 for b in plan)
        else:
            assert all(1 <= len(b) <= size for b in plan)


# lengths [5, 1, 3, 2]: 11 real tokens.
LENGTHS = [5, 1, 3, 2]


def test_padding_waste_fixed_by_hand() -> None:
    # fixed/2: [0,1] -> longest 5 x 2 = 10, [2,3] -> 3 x 2 = 6; padded 16, waste (16-11)/16 = 0.3125.
    plan = FixedBatcher(2).plan(LENGTHS)
    assert plan == [[0, 1], [2, 3]]
    stats = plan_stats(plan, LENGTHS)
    assert (stats.real_tokens, stats.padded_tokens) == (11, 16)
    assert padding_waste(plan, LENGTHS) == pytest.approx(5 / 16)


def test_padding_waste_sorted_by_hand() -> None:
    # sorted/2: order by length 1,3,2,0 (lengths 1,2,3,5) -> [1,3]: 2x2 = 4, [2,0]: 5x2 = 10; waste 3/14.
    plan = SortedBatcher(2).plan(LENGTHS)
    assert plan == [[1, 3], [2, 0]]
    assert padding_waste(plan, LENGTHS) == pytest.approx(3 / 14)


def test_padding_waste_token_budget_by_hand() -> None:
    # budget 6, length order 1(1), 3(2), 2(3), 0(5): [1,3] = 2x2 = 4 <= 6; adding 2 -> 3x3 = 9 > 6 so cut;
    # [2] then adding 0 -> 2x5 = 10 > 6 so cut; [0]. Padded 4 + 3 + 5 = 12, waste 1/12.
    plan = TokenBudgetBatcher(6).plan(LENGTHS)
    assert plan == [[1, 3], [2], [0]]
    assert padding_waste(plan, LENGTHS) == pytest.approx(1 / 12)


def test_report_padding_waste_matches_plan() -> None:
    texts = ["req0 a b c", "req1", "req2 a", "req3"]  # lengths 6, 3, 4, 3 with the double's +2
    _, report = score_texts(WordScorer(), texts, FixedBatcher(2))
    # [0,1]: 6 x 2 = 12, [2,3]: 4 x 2 = 8; padded 20, real 16, waste 4/20.
    assert (report.real_tokens, report.padded_tokens) == (16, 20)
    assert report.padding_waste == pytest.approx(0.2)


def test_budget_smaller_than_one_sequence_is_a_clear_error() -> None:
    with pytest.raises(RlsimError, match="smaller than one sequence.*at least 7"):
        TokenBudgetBatcher(6).plan([3, 7])


@pytest.mark.parametrize("bad", [0, -1, None, 2.5])
def test_batch_size_must_be_positive(bad) -> None:
    with pytest.raises(RlsimError, match="batch size"):
        make_batcher("fixed", size=bad)
    with pytest.raises(RlsimError, match="budget"):
        make_batcher("token-budget", budget=bad)


def test_unknown_batcher_lists_valid_names() -> None:
    with pytest.raises(RlsimError) as err:
        make_batcher("magic", size=4)
    for name in ("fixed", "sorted", "token-budget"):
        assert name in str(err.value)
    assert set(BATCHERS.names()) >= {"fixed", "sorted", "token-budget"}


def test_make_batcher_builds_each_kind() -> None:
    assert make_batcher("sorted", size=8).describe() == "sorted/8"
    assert make_batcher("token-budget", budget=4096).describe() == "token-budget/4096"


def test_empty_input_scores_to_empty() -> None:
    rewards, report = score_texts(WordScorer(), [], SortedBatcher(4))
    assert rewards.shape == (0,) and report.batches == 0 and report.padding_waste == 0.0


def test_scorer_returning_wrong_count_is_caught() -> None:
    class Short(WordScorer):
        def score_batch(self, texts: list[str]) -> np.ndarray:
            return super().score_batch(texts)[:-1]

    with pytest.raises(RuntimeError, match="rewards for a batch"):
        score_texts(Short(), ["req0", "req1"], FixedBatcher(2))


def test_bad_plan_is_caught() -> None:
    with pytest.raises(RuntimeError, match="exactly once"):
        check_plan([[0, 1], [1]], 3)


def test_the_online_dynamic_batcher_is_registered_but_kept_out_of_offline_use():
    from rlsim.batching import DynamicBatcher, batcher_names, make_batcher

    assert BATCHERS.get("dynamic") is DynamicBatcher and BATCHERS.info("dynamic").online
    assert "dynamic" not in batcher_names() and batcher_names(online=True) == ["dynamic"]
    with pytest.raises(RlsimError, match="online.*fixed, sorted, token-budget"):
        make_batcher("dynamic", size=8)
