"""The reference model: eager and ORT runtimes agree, the exported graph returns log-probs (not
logits), the native engine is refused with its reason, and an unexportable model is named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.loop.roles.reference import EagerReference, ReferenceSettings, make_reference
from rlsim.rollout.types import Rollout

SETTINGS = ReferenceSettings(threads=1, micro_batch=3)


def batch() -> list[Rollout]:
    rng = np.random.default_rng(2)
    # Lengths differ within each micro-batch, so padding of ids and of positions is exercised.
    return [
        Rollout(
            uid,
            uid // 2,
            [int(x) for x in rng.integers(1000, 2000, size=2 + 3 * (uid % 3))],
            [int(x) for x in rng.integers(1000, 2000, size=1 + 2 * uid)],
        )
        for uid in range(7)
    ]


@pytest.fixture(scope="module")
def eager(tiny_policy) -> dict[int, np.ndarray]:
    return EagerReference(tiny_policy, SETTINGS).logprobs(batch())


def test_eager_reference_gives_the_policy_log_probs_of_response_tokens(tiny_policy, eager) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_policy)).eval()
    for r in batch():
        ids = torch.tensor([r.prompt_ids + r.response_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1)
        expected = logp[torch.arange(len(r.prompt_ids) - 1, ids.shape[1] - 1), ids[0, len(r.prompt_ids) :]]
        np.testing.assert_allclose(eager[r.uid], expected.numpy(), atol=1e-5)


def test_exported_graph_matches_eager_to_1e_4(tiny_policy, eager, tmp_path_factory, monkeypatch) -> None:
    import onnx

    monkeypatch.setenv("RLSIM_CACHE", str(tmp_path_factory.mktemp("cache")))
    ort_ref = make_reference(tiny_policy, ReferenceSettings(runtime="ort", threads=1, micro_batch=3))
    got = ort_ref.logprobs(batch())
    assert set(got) == set(eager)
    for uid in eager:
        assert got[uid].shape == eager[uid].shape
        np.testing.assert_allclose(got[uid], eager[uid], atol=1e-4, rtol=0)
    # Log-probs of the given tokens leave the graph, not (batch, seq, vocab) logits.
    (out,) = onnx.load(str(ort_ref.graph_path), load_external_data=False).graph.output
    assert out.name == "logprobs" and len(out.type.tensor_type.shape.dim) == 2


def test_native_runtime_is_refused_with_the_reason(tiny_policy) -> None:
    with pytest.raises(RlsimError, match="one float per sequence"):
        make_reference(tiny_policy, ReferenceSettings(runtime="native"))


def test_a_model_that_cannot_be_exported_is_named(tmp_path) -> None:
    from rlsim.scoring.reference_export import export_reference

    bad = tmp_path / "my-odd-policy"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(RlsimError, match="my-odd-policy.*could not be exported.*reference.runtime: eager"):
        export_reference(bad, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written is left to be reused
