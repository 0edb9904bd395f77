"""The GRPO update on the real tiny policy: log-probs, a no-op step, an improving step, exported weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlsim.loop.trainer import PolicyTrainer, TrainerSettings
from rlsim.rollout.types import Rollout


def rollouts(n_groups: int = 2, group: int = 3, seed: int = 0) -> list[Rollout]:
    rng = np.random.default_rng(seed)
    out = []
    for uid in range(n_groups * group):
        prompt = [int(x) for x in rng.integers(1000, 2000, size=int(rng.integers(3, 8)))]
        response = [int(x) for x in rng.integers(1000, 2000, size=int(rng.integers(4, 12)))]
        out.append(Rollout(uid, uid // group, prompt, response))
    return out


def make(tiny_policy, **kw) -> PolicyTrainer:
    return PolicyTrainer(tiny_policy, TrainerSettings(threads=1, micro_batch=4, **kw))


def params(t: PolicyTrainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in t._model.named_parameters()}


def test_response_logprobs_match_the_full_model(tiny_policy) -> None:
    t = make(tiny_policy)
    batch = rollouts()
    b = t._pack(batch, np.zeros(len(batch), dtype=np.float32))
    with torch.no_grad():
        mine = t._token_logprobs(b)
        full = torch.log_softmax(t._model(input_ids=b["ids"], attention_mask=b["attn"]).logits[:, :-1], -1)
        ref = full.gather(-1, b["ids"][:, 1:, None])[..., 0][b["mask"]]
    assert mine.shape == (sum(len(r.response_ids) for r in batch),)
    torch.testing.assert_close(mine, ref, rtol=1e-5, atol=1e-5)


def test_equal_rewards_in_every_group_leave_the_policy_unchanged(tiny_policy) -> None:
    t = make(tiny_policy, lr=1e-3)
    before = params(t)
    stats = t.train_step(rollouts(), {uid: 0.5 for uid in range(6)})  # advantages all zero
    assert stats.loss == 0.0 and stats.grad_norm == 0.0
    assert all(torch.equal(before[k], v) for k, v in params(t).items())


def test_a_step_raises_the_likelihood_of_better_samples(tiny_policy) -> None:
    t = make(tiny_policy, lr=1e-4)
    batch = rollouts()
    rewards = {r.uid: float(r.uid % 3) for r in batch}  # in each group: 0, 1, 2 -> advantages -1.22, 0, +1.22
    best = [r for r in batch if r.uid % 3 == 2]
    worst = [r for r in batch if r.uid % 3 == 0]

    def mean_logprob(rs: list[Rollout]) -> float:
        with torch.no_grad():
            return float(t._token_logprobs(t._pack(rs, np.zeros(len(rs), dtype=np.float32))).mean())

    b0, w0 = mean_logprob(best), mean_logprob(worst)
    stats = t.train_step(batch, rewards)
    assert stats.sequences == 6 and stats.response_tokens == sum(len(r.response_ids) for r in batch)
    assert stats.grad_norm > 0
    assert mean_logprob(best) > b0 and mean_logprob(worst) < w0


def test_missing_reward_is_refused(tiny_policy) -> None:
    with pytest.raises(RuntimeError, match="no reward"):
        make(tiny_policy).train_step(rollouts(), {0: 1.0})


def test_exported_weights_are_the_checkpoint_names_and_copies(tiny_policy) -> None:
    from safetensors.numpy import load_file

    t = make(tiny_policy)
    state = t.export_weights()
    on_disk = load_file(str(tiny_policy / "model.safetensors"))
    assert set(state) == set(on_disk)
    np.testing.assert_array_equal(state["lm_head.weight"], on_disk["lm_head.weight"])
    state["lm_head.weight"][:] = 0  # a copy: the model must not change
    assert float(t._model.lm_head.weight.detach().abs().sum()) > 0
