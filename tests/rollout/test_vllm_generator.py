"""vLLM on CPU with the tiny policy (session engine): exact lengths, streaming, in-place weight reload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlsim.rollout.types import RolloutRequest
from rlsim.rollout.weights import WeightsFolder

pytestmark = pytest.mark.slow

REQS = [RolloutRequest(uid, uid // 4, f"prompt number {uid // 4}", 4 + 3 * uid) for uid in range(12)]


def test_lengths_are_enforced_per_request(vllm_generator) -> None:
    out = vllm_generator.generate(REQS)
    assert [r.uid for r in out] == list(range(12))
    assert [len(r.response_ids) for r in out] == [r.response_tokens for r in REQS]
    assert all(r.prompt_ids for r in out)


def test_stream_yields_micro_batches_as_requests_finish(vllm_generator) -> None:
    batches = list(vllm_generator.stream(REQS, micro_batch=5))
    assert [len(b) for b in batches] == [5, 5, 2]
    assert sorted(r.uid for b in batches for r in b) == list(range(12))
    # Continuous batching: shorter requests finish (and are handed back) first.
    first_max = max(len(r.response_ids) for r in batches[0])
    last_min = min(len(r.response_ids) for r in batches[-1])
    assert first_max < last_min


def test_stopping_a_stream_early_leaves_no_request_in_the_engine(vllm_generator) -> None:
    stream = vllm_generator.stream(REQS, micro_batch=2)
    next(stream)
    stream.close()
    assert not vllm_generator._engine.has_unfinished_requests()


def test_reload_swaps_the_weights_in_place_and_back(vllm_generator, tiny_policy: Path) -> None:
    from safetensors.numpy import load_file

    probe = REQS[:2]
    before = [r.response_ids for r in vllm_generator.generate(probe)]
    state = load_file(str(tiny_policy / "model.safetensors"))
    folder = WeightsFolder()
    try:
        changed = dict(state)
        changed["lm_head.weight"] = (
            np.random.default_rng(0).standard_normal(state["lm_head.weight"].shape).astype(np.float32)
        )
        result = vllm_generator.load_weights(folder.write(changed))
        assert result.method == "vllm-reload" and result.seconds > 0
        assert [r.response_ids for r in vllm_generator.generate(probe)] != before
        vllm_generator.load_weights(folder.write(state))
        assert [r.response_ids for r in vllm_generator.generate(probe)] == before  # greedy, original weights
    finally:
        folder.close()


def test_a_reload_between_engine_steps_reaches_the_requests_in_flight(vllm_generator, tiny_policy: Path) -> None:
    """What partial rollouts would build on (README, "Why no partial rollouts"): weights reloaded between two
    ``LLMEngine.step()`` calls apply to the requests already running. Not at a token the caller can count:
    vLLM's engine core runs ahead of ``step()``, so the switch lands a few tokens after the call."""
    from safetensors.numpy import load_file

    reqs = [RolloutRequest(uid, 0, f"prompt number {uid}", 24) for uid in range(3)]
    baseline = {r.uid: r.response_ids for r in vllm_generator.generate(reqs)}  # greedy, original weights
    state = load_file(str(tiny_policy / "model.safetensors"))
    changed = dict(state)
    changed["lm_head.weight"] = (
        np.random.default_rng(1).standard_normal(state["lm_head.weight"].shape).astype(np.float32)
    )
    folder = WeightsFolder()
    engine = vllm_generator._engine
    try:
        fresh = {r.uid: r.response_ids for r in _generate_with(vllm_generator, folder.write(changed), reqs)}
        vllm_generator.load_weights(folder.write(state))
        pending = vllm_generator._submit(reqs)
        for _ in range(8):  # the first step prefills and samples token 0: 8 tokens under the old weights
            engine.step()
        vllm_generator.load_weights(folder.write(changed))
        done = {}
        while engine.has_unfinished_requests():
            done.update((o.request_id, o) for o in engine.step() if o.finished)
        out = {req.uid: vllm_generator._rollout(req, done[rid]).response_ids for rid, req in pending.items()}
    finally:
        vllm_generator.load_weights(folder.write(state))  # the session engine goes back to the original policy
        folder.close()
    for uid, tokens in out.items():
        assert fresh[uid][0] != baseline[uid][0]  # the new LM head changes greedy tokens from the first on
        switch = next((i for i, (a, b) in enumerate(zip(tokens, baseline[uid], strict=True)) if a != b), None)
        assert len(tokens) == 24 and switch is not None and 8 <= switch < 24  # finished, old prefix, new tail


def _generate_with(generator, weights_dir: Path, reqs: list[RolloutRequest]):  # type: ignore[no-untyped-def]
    generator.load_weights(weights_dir)
    return generator.generate(reqs)
