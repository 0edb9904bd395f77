"""The PPO critic on the tiny policy: one value per response token, initialised from the policy, and a
value loss that falls as it is fitted to fixed returns."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from rlsim.loop.roles.critic import CriticModel, CriticSettings
from rlsim.rollout.types import Rollout


def batch() -> list[Rollout]:
    rng = np.random.default_rng(1)
    return [
        Rollout(
            uid,
            uid // 2,
            [int(x) for x in rng.integers(1000, 2000, size=4 + uid % 3)],
            [int(x) for x in rng.integers(1000, 2000, size=3 + uid)],
        )
        for uid in range(6)
    ]


def test_values_come_per_response_token_from_the_policy_backbone(tiny_policy) -> None:
    from transformers import AutoModelForCausalLM

    # transformers' own handler holds whatever stderr was at its first log, so listen on its logger instead.
    heard: list[str] = []
    listener = logging.Handler()
    listener.emit = lambda record: heard.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("transformers").addHandler(listener)
    try:
        critic = CriticModel(tiny_policy, CriticSettings(threads=1, micro_batch=4))
    finally:
        logging.getLogger("transformers").removeHandler(listener)
    assert not [m for m in heard if "LOAD REPORT" in m]  # the policy's lm_head is not reported as unexpected
    rs = batch()
    values = critic.values(rs)
    assert {u: v.shape for u, v in values.items()} == {r.uid: (len(r.response_ids),) for r in rs}
    assert all(v.dtype == np.float32 and np.all(np.isfinite(v)) for v in values.values())
    policy = AutoModelForCausalLM.from_pretrained(str(tiny_policy))
    for name, p in policy.model.named_parameters():  # the backbone is the policy's, not a fresh init
        assert torch.equal(dict(critic._backbone.named_parameters())[name], p)


def test_value_loss_falls_over_20_updates_on_a_fixed_batch(tiny_policy) -> None:
    critic = CriticModel(tiny_policy, CriticSettings(lr=1e-4, value_clip=0.2, threads=1, micro_batch=4))
    rs = batch()
    # Sequence-level targets of +-1, as an outcome reward with gamma = lam = 1 gives.
    returns = {r.uid: np.full(len(r.response_ids), 1.0 if r.uid % 2 else -1.0, dtype=np.float32) for r in rs}
    losses = []
    for _ in range(20):
        # Each round clips against the values just computed, as consecutive PPO steps would.
        losses.append(critic.update(rs, returns, critic.values(rs)).value_loss)
    assert losses[0] > 0.4  # initial values ~0 against targets of +-1: 0.5 * 1 per token
    assert losses[-1] < 0.5 * losses[0], losses
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_missing_returns_are_refused(tiny_policy) -> None:
    critic = CriticModel(tiny_policy, CriticSettings(threads=1))
    rs = batch()
    with pytest.raises(ValueError, match="no returns"):
        critic.update(rs, {}, critic.values(rs))


def _critic_params(critic: CriticModel) -> dict[str, torch.Tensor]:
    named = dict(critic._backbone.named_parameters())
    assert critic._head is not None
    named.update({f"head.{k}": v for k, v in critic._head.named_parameters()})
    return {k: v.detach().clone() for k, v in named.items()}


def test_mini_batches_are_separate_critic_steps_each_timed(tiny_policy) -> None:
    # Six rollouts in mini-batches of 3, two epochs: four AdamW steps, each on its own mini-batch's
    # token-mean loss, so the weights end where four plain updates (0-2, 3-5, 0-2, 3-5) leave them.
    rs = batch()
    returns = {r.uid: np.full(len(r.response_ids), 1.0 if r.uid % 2 else -1.0, dtype=np.float32) for r in rs}
    split = CriticModel(tiny_policy, CriticSettings(lr=1e-4, threads=1, micro_batch=2, epochs=2, mini_batch_size=3))
    old = split.values(rs)
    stats = split.update(rs, returns, old)
    assert stats.optimizer_steps == 4 and stats.step_seconds is not None and len(stats.step_seconds) == 4
    assert stats.optimizer_seconds is not None and len(stats.optimizer_seconds) == 4
    assert all(0 < o < s for o, s in zip(stats.optimizer_seconds, stats.step_seconds, strict=True))
    plain = CriticModel(tiny_policy, CriticSettings(lr=1e-4, threads=1, micro_batch=2))
    for part in (rs[:3], rs[3:], rs[:3], rs[3:]):
        assert plain.update(part, returns, old).optimizer_steps == 1
    a, b = _critic_params(split), _critic_params(plain)
    assert all(torch.allclose(a[k], b[k], atol=1e-7) for k in a)
    with pytest.raises(ValueError, match="does not divide the batch of 6"):
        CriticModel(tiny_policy, CriticSettings(threads=1, mini_batch_size=4)).update(rs, returns, old)


def test_the_critic_takes_the_trainers_mini_batches_and_epochs() -> None:
    from rlsim.loop.config import RunConfig
    from rlsim.loop.config.algorithm import critic_settings

    config = RunConfig.model_validate({"trainer": {"algorithm": "ppo", "mini_batch_size": 8, "epochs": 2}})
    settings = critic_settings(config)
    assert (settings.mini_batch_size, settings.epochs) == (8, 2)
