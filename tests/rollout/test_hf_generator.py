"""The Hugging Face fallback on the real tiny policy: exact lengths, streaming order, weight reload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlsim.rollout.generator import GeneratorSettings, make_generator
from rlsim.rollout.types import RolloutRequest
from rlsim.rollout.weights import WeightsFolder

REQS = [RolloutRequest(uid, uid // 2, f"tell me about item {uid // 2}", n) for uid, n in enumerate([5, 3, 5, 2, 4])]


@pytest.fixture(scope="module")
def hf(tiny_policy):
    return make_generator("hf", tiny_policy, GeneratorSettings(temperature=0.0, threads=1))


def test_every_request_gets_exactly_its_length_in_request_order(hf) -> None:
    out = hf.generate(REQS)
    assert [r.uid for r in out] == [0, 1, 2, 3, 4]
    assert [len(r.response_ids) for r in out] == [5, 3, 5, 2, 4]
    assert out[0].prompt_ids == out[1].prompt_ids  # same group, same prompt


def test_stream_hands_back_short_rollouts_first_in_micro_batches(hf) -> None:
    batches = list(hf.stream(REQS, micro_batch=2))
    assert [len(b) for b in batches] == [2, 2, 1]
    lengths = [len(r.response_ids) for b in batches for r in b]
    assert lengths == sorted(lengths)
    assert sorted(r.uid for b in batches for r in b) == [0, 1, 2, 3, 4]


def test_loaded_weights_change_the_output(hf, tiny_policy: Path) -> None:
    from safetensors.numpy import load_file

    before = hf.generate(REQS[:1])[0].response_ids
    state = load_file(str(tiny_policy / "model.safetensors"))
    folder = WeightsFolder()
    try:
        changed = {k: (v * 3.0 if k == "lm_head.weight" else v) for k, v in state.items()}
        rng = np.random.default_rng(0)
        changed["lm_head.weight"] = rng.standard_normal(state["lm_head.weight"].shape).astype(np.float32)
        result = hf.load_weights(folder.write(changed))
        assert result.method == "hf-load"
        assert hf.generate(REQS[:1])[0].response_ids != before
        hf.load_weights(folder.write(state))
        assert hf.generate(REQS[:1])[0].response_ids == before  # greedy: the original weights come back exactly
    finally:
        folder.close()
