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


class OfferAfter:
    """A ``SwapPoint`` that offers ``folder`` as version 1 before the engine's ``steps``-th step."""

    def __init__(self, folder: Path, steps: int) -> None:
        self.folder, self.left, self.loads = folder, steps, 0

    def pending(self):  # type: ignore[no-untyped-def]
        self.left -= 1
        return (self.folder, 1) if self.left == 0 else None

    def swapped(self, result, start: float, end: float) -> None:  # type: ignore[no-untyped-def]
        assert result.method == "vllm-reload" and start <= end
        self.loads += 1


def test_a_weight_swap_mid_generation_keeps_the_old_prefix_and_continues_under_the_new_weights(
    vllm_generator, tiny_policy: Path
) -> None:
    """Partial rollouts: new weights offered before the 8th engine step. Each request keeps the tokens the old
    weights sampled (greedy: the baseline's first k), records the swap at k, and samples the rest under
    the new weights from prompt + those k tokens: exactly what a fresh request of that prompt gives."""
    from safetensors.numpy import load_file

    reqs = [RolloutRequest(uid, 0, f"prompt number {uid}", 24) for uid in range(3)]
    baseline = {r.uid: r for r in vllm_generator.generate(reqs)}  # greedy, original weights
    state = load_file(str(tiny_policy / "model.safetensors"))
    changed = dict(state)
    changed["lm_head.weight"] = (
        np.random.default_rng(1).standard_normal(state["lm_head.weight"].shape).astype(np.float32)
    )
    folder = WeightsFolder()
    engine = vllm_generator._engine
    try:
        swap = OfferAfter(folder.write(changed), steps=8)
        out = vllm_generator.generate(reqs, swap=swap)
        assert swap.loads == 1 and not engine.has_unfinished_requests()
        expected = {}
        for r in out:  # the new weights' greedy continuation of prompt + the kept prefix, as a request of its own
            (_, k), prefix = r.version_spans[0], baseline[r.uid].response_ids[: r.version_spans[0][1]]
            rid = vllm_generator._add(baseline[r.uid].prompt_ids + prefix, 24 - k)
            while engine.has_unfinished_requests():
                expected.update((o.request_id, list(o.outputs[0].token_ids)) for o in engine.step() if o.finished)
            expected[r.uid] = prefix + expected.pop(rid)
    finally:
        vllm_generator.load_weights(folder.write(state))  # the session engine goes back to the original policy
        folder.close()
    for r in out:
        ((version, k),) = r.version_spans
        assert version == 1 and 1 <= k < 24  # some tokens under each version
        assert r.prompt_ids == baseline[r.uid].prompt_ids and len(r.response_ids) == 24
        assert r.response_ids == expected[r.uid]
        assert r.response_ids[k:] != baseline[r.uid].response_ids[k:]  # the new LM head did take over
