"""The update on the real tiny policy: log-probs, a no-op step, an improving step, exported weights;
RLOO and PPO steps (with an in-process critic and reference), and the KL in the loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlsim.algorithms.experience import AlgorithmSettings
from rlsim.loop.roles.critic import CriticModel, CriticSettings
from rlsim.loop.roles.packing import mini_batch_split, pack
from rlsim.loop.roles.reference import EagerReference, ReferenceSettings
from rlsim.loop.roles.trainer import PolicyTrainer, TrainerSettings
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
    mine = t.policy_logprobs(batch)
    b = pack(batch, 0, "cpu")
    with torch.no_grad():
        full = torch.log_softmax(t._model(input_ids=b.ids, attention_mask=b.attn).logits[:, :-1], -1)
        ref = b.split(full.gather(-1, b.ids[:, 1:, None])[..., 0][b.mask])
    assert {u: len(v) for u, v in mine.items()} == {r.uid: len(r.response_ids) for r in batch}
    for uid in ref:
        np.testing.assert_allclose(mine[uid], ref[uid], rtol=1e-5, atol=1e-5)


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
        return float(np.concatenate(list(t.policy_logprobs(rs).values())).mean())

    b0, w0 = mean_logprob(best), mean_logprob(worst)
    stats = t.train_step(batch, rewards)
    assert stats.sequences == 6 and stats.response_tokens == sum(len(r.response_ids) for r in batch)
    assert stats.grad_norm > 0
    assert mean_logprob(best) > b0 and mean_logprob(worst) < w0
    assert stats.algorithm == "grpo" and stats.value_loss is None and stats.kl is None
    assert stats.loss == stats.policy_loss  # no KL term: today's meaning of loss
    assert 0 < stats.entropy < np.log(30522) + 1e-3  # nats, at most that of a uniform vocabulary


def test_a_checkpoint_restores_weights_optimizer_and_version_into_a_new_trainer(tiny_policy, tmp_path) -> None:
    t = make(tiny_policy, lr=1e-4)
    batch = rollouts()
    rewards = {r.uid: float(r.uid % 3) for r in batch}
    t.train_step(batch, rewards)
    t.save_checkpoint(tmp_path / "trainer-v1.pt", 1)
    assert [p.name for p in tmp_path.iterdir()] == ["trainer-v1.pt"]  # written via a temporary file, now gone
    fresh = make(tiny_policy, lr=1e-4)
    assert fresh.load_checkpoint(tmp_path / "trainer-v1.pt") == 1
    before, restored = params(t), params(fresh)
    assert all(torch.equal(before[k], restored[k]) for k in before)
    t.train_step(batch, rewards)  # the same next update from the same weights and AdamW moments
    fresh.train_step(batch, rewards)
    after, again = params(t), params(fresh)
    assert all(torch.allclose(after[k], again[k], atol=1e-7) for k in after)
    assert not all(torch.equal(after[k], before[k]) for k in after)


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


def test_rloo_step_uses_the_leave_one_out_baseline(tiny_policy) -> None:
    t = make(tiny_policy, lr=1e-4, algorithm=AlgorithmSettings("rloo"))
    batch = rollouts()
    before = params(t)
    stats = t.train_step(batch, {r.uid: float(r.uid % 3) for r in batch})
    assert stats.algorithm == "rloo" and stats.value_loss is None and stats.grad_norm > 0
    assert any(not torch.equal(before[k], v) for k, v in params(t).items())


def test_kl_in_the_loss_is_added_to_the_policy_loss(tiny_policy) -> None:
    batch = rollouts()
    ref = {r.uid: np.full(len(r.response_ids), -5.0, dtype=np.float32) for r in batch}  # far from the policy
    # An adaptive coefficient (target 1, horizon 6 sequences) only moves after the step.
    alg = AlgorithmSettings("grpo", kl_coef=0.5, kl_estimator="k1", kl_target="loss", kl_target_value=1.0, kl_horizon=6)
    t = make(tiny_policy, algorithm=alg)
    own = t.policy_logprobs(batch)
    stats = t.train_step(batch, {r.uid: 0.5 for r in batch}, ref_logprobs=ref)
    # Equal rewards: the surrogate is 0; the loss is 0.5 x the token-mean k1 = 0.5 * mean(log p + 5).
    expected_kl = float(np.mean(np.concatenate([own[u] - ref[u] for u in own])))
    assert stats.policy_loss == 0.0
    assert stats.kl == pytest.approx(expected_kl, rel=1e-4)
    assert stats.loss == pytest.approx(0.5 * expected_kl, rel=1e-4)
    # verl's split: the KL before its coefficient on its own (actor/kl_loss), the surrogate alone (pg_loss).
    assert stats.kl_loss == pytest.approx(expected_kl, rel=1e-4) and stats.kl_coef == 0.5
    assert stats.sequence_reward_mean == stats.reward_mean == 0.5  # the KL is not in the reward
    # k1 = log p + 5 is about -5 (log p of a random 30k vocabulary is about -10): KL / target - 1 is below
    # -0.2, clipped there; 6 sequences over horizon 6: the coefficient becomes 0.5 x (1 - 0.2) = 0.4.
    assert expected_kl < 0 and t.algorithm.kl_coef == pytest.approx(0.4)


def test_a_ppo_step_updates_actor_and_critic_against_the_frozen_reference(tiny_policy) -> None:
    batch = rollouts()
    alg = AlgorithmSettings("ppo", gamma=1.0, lam=0.95, kl_coef=0.1, kl_estimator="k3", kl_target="reward")
    t = make(tiny_policy, lr=1e-4, algorithm=alg)
    critic = CriticModel(tiny_policy, CriticSettings(lr=1e-4, threads=1, micro_batch=4))
    reference = EagerReference(tiny_policy, ReferenceSettings(threads=1, micro_batch=4))
    ref_before = reference.logprobs(batch)
    values = critic.values(batch)
    rewards = {r.uid: float(r.uid % 3) for r in batch}
    stats = t.train_step(batch, rewards, ref_logprobs=ref_before, values=values, critic=critic)
    assert stats.algorithm == "ppo" and stats.value_loss is not None and stats.value_loss > 0
    # Policy and reference start from the same weights: the behaviour KL is ~0 before the step.
    assert stats.kl == pytest.approx(0.0, abs=1e-5)
    assert stats.sequence_reward_mean == pytest.approx(stats.reward_mean, abs=1e-4)  # reward - 0.1 x ~0 KL
    assert stats.kl_loss is None and stats.pg_clip_fraction == 0.0  # one epoch from the old policy: ratio 1
    assert stats.grad_norm > 0 and stats.response_tokens == sum(len(r.response_ids) for r in batch)
    after = critic.values(batch)
    assert any(not np.allclose(after[u], values[u]) for u in values)
    moved = t.policy_logprobs(batch)
    ref_after = reference.logprobs(batch)
    assert any(not np.allclose(moved[u], ref_before[u], atol=1e-6) for u in moved)  # the policy moved
    for u in ref_before:  # the reference did not
        np.testing.assert_array_equal(ref_after[u], ref_before[u])


def test_ppo_without_values_is_refused_naming_the_critic(tiny_policy) -> None:
    t = make(tiny_policy, algorithm=AlgorithmSettings("ppo"))
    with pytest.raises(RuntimeError, match="critic values"):
        t.train_step(rollouts(), {uid: 1.0 for uid in range(6)})


def test_mini_batches_are_separate_optimizer_steps_each_timed(tiny_policy) -> None:
    # Six rollouts in mini-batches of 3, two epochs: four AdamW steps, each on its own mini-batch's loss,
    # so the weights end where four plain updates (rollouts 0-2, 3-5, 0-2, 3-5) leave them.
    batch = rollouts()
    rewards = {r.uid: float(r.uid % 3) for r in batch}
    split = make(tiny_policy, lr=1e-4, mini_batch_size=3, epochs=2)
    exp = split.experience(batch, rewards)
    stats = split.update(batch, exp)
    assert stats.optimizer_steps == 4 and stats.step_seconds is not None and len(stats.step_seconds) == 4
    assert all(s > 0 for s in stats.step_seconds) and stats.sequences == 6
    plain = make(tiny_policy, lr=1e-4)
    for part in (batch[:3], batch[3:], batch[:3], batch[3:]):
        assert plain.update(part, exp).optimizer_steps == 1
    a, b = params(split), params(plain)
    assert all(torch.allclose(a[k], b[k], atol=1e-7) for k in a)
    assert [len(p) for p in mini_batch_split(batch, 2)] == [2, 2, 2] and len(mini_batch_split(batch, None)) == 1
    with pytest.raises(ValueError, match="does not divide the batch of 6"):
        mini_batch_split(batch, 4)
