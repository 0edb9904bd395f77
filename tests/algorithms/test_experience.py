"""The experience phase's arithmetic: per-token advantages for each algorithm, KL placement, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.algorithms.experience import AlgorithmSettings, make_experience
from rlsim.rollout.types import Rollout

# Two prompts x 2 samples; response lengths 2, 3, 1, 2.
ROLLOUTS = [
    Rollout(0, 0, [1], [5, 6]),
    Rollout(1, 0, [1], [5, 6, 7]),
    Rollout(2, 1, [2], [8]),
    Rollout(3, 1, [2], [8, 9]),
]
REWARDS = {0: 1.0, 1: 3.0, 2: 0.0, 3: 4.0}
OLD = {x.uid: np.full(len(x.response_ids), -1.0, dtype=np.float32) for x in ROLLOUTS}
REF = {x.uid: np.full(len(x.response_ids), -1.5, dtype=np.float32) for x in ROLLOUTS}


def test_grpo_spreads_each_sequence_advantage_over_its_tokens() -> None:
    exp = make_experience(AlgorithmSettings("grpo"), ROLLOUTS, REWARDS, OLD)
    # Group 0: 1, 3 -> -1, +1; group 1: 0, 4 -> -1, +1 (population std).
    for uid, a in {0: -1.0, 1: 1.0, 2: -1.0, 3: 1.0}.items():
        np.testing.assert_allclose(exp.advantages[uid], np.full(len(OLD[uid]), a), atol=1e-5)
    assert exp.returns is None and exp.kl is None and exp.kl_mean() is None


def test_kl_in_the_reward_is_summed_over_the_sequence_before_the_baseline() -> None:
    # k1 = -1 - (-1.5) = 0.5 per token; coef 1: sequence penalties 1.0, 1.5, 0.5, 1.0.
    # RLOO on the penalised rewards: group 0: 0, 1.5 -> -1.5, +1.5; group 1: -0.5, 3 -> -3.5, +3.5.
    s = AlgorithmSettings("rloo", kl_coef=1.0, kl_estimator="k1", kl_target="reward")
    exp = make_experience(s, ROLLOUTS, REWARDS, OLD, REF)
    assert [float(exp.advantages[u][0]) for u in range(4)] == pytest.approx([-1.5, 1.5, -3.5, 3.5])
    assert exp.kl_mean() == pytest.approx(0.5)
    assert exp.ref_logprobs is not None and exp.old_logprobs[1].shape == (3,)


def test_ppo_advantages_come_from_gae_and_are_whitened() -> None:
    values = {x.uid: np.zeros(len(x.response_ids), dtype=np.float32) for x in ROLLOUTS}
    s = AlgorithmSettings("ppo", gamma=1.0, lam=1.0)
    exp = make_experience(s, ROLLOUTS, REWARDS, OLD, values=values)
    assert exp.returns is not None
    # Values 0, gamma = lam = 1: every token's return is its sequence's reward.
    for x in ROLLOUTS:
        np.testing.assert_allclose(exp.returns[x.uid], np.full(len(x.response_ids), REWARDS[x.uid]))
    flat = np.concatenate([exp.advantages[x.uid] for x in ROLLOUTS])
    assert flat.shape == (8,) and abs(flat.mean()) < 1e-5 and abs(flat.std() - 1) < 1e-4
    # Whitening keeps the order: the reward-4 sequence's tokens rank above the reward-0 one's.
    assert exp.advantages[3].min() > exp.advantages[2].max()


def test_kl_in_the_reward_lowers_ppo_returns_token_by_token() -> None:
    values = {x.uid: np.zeros(len(x.response_ids), dtype=np.float32) for x in ROLLOUTS}
    s = AlgorithmSettings("ppo", gamma=1.0, lam=1.0, kl_coef=0.2, kl_estimator="k1", kl_target="reward")
    exp = make_experience(s, ROLLOUTS, REWARDS, OLD, REF, values)
    # Rollout 1: reward 3, per-token penalty 0.2 * 0.5 = 0.1 -> returns 3 - 0.3, 3 - 0.2, 3 - 0.1.
    np.testing.assert_allclose(exp.returns[1], [2.7, 2.8, 2.9], atol=1e-5)


@pytest.mark.parametrize(
    "settings, kwargs, match",
    [
        (AlgorithmSettings("ppo"), {}, "critic values"),
        (AlgorithmSettings("grpo", kl_coef=0.1), {}, "reference log-probs"),
        (AlgorithmSettings("grpo", kl_coef=0.1), {"ref_logprobs": {0: np.zeros(2)}}, "3 rollouts have no reference"),
        (AlgorithmSettings("ppo"), {"values": {x.uid: np.zeros(1) for x in ROLLOUTS}}, "values for"),
    ],
)
def test_missing_or_misshapen_inputs_are_named(settings, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        make_experience(settings, ROLLOUTS, REWARDS, OLD, **kwargs)


def test_sequence_rewards_carry_the_kl_penalty_as_verls_critic_rewards_mean() -> None:
    # Score 1, k1 = 0.5 on the one token, coef 0.1: the summed token-level reward is 1 - 0.05 = 0.95 (verl's
    # critic/rewards/mean); with the KL in the loss instead it is the score, 1.
    one = [Rollout(0, 0, [1], [5]), Rollout(1, 0, [1], [6])]
    old = {0: np.array([-1.0], np.float32), 1: np.array([-1.0], np.float32)}
    ref = {0: np.array([-1.5], np.float32), 1: np.array([-1.0], np.float32)}
    rewards = {0: 1.0, 1: 1.0}
    s = AlgorithmSettings("grpo", kl_coef=0.1, kl_estimator="k1", kl_target="reward")
    exp = make_experience(s, one, rewards, old, ref)
    assert exp.sequence_rewards == pytest.approx({0: 0.95, 1: 1.0})
    in_loss = make_experience(AlgorithmSettings("grpo", kl_coef=0.1, kl_target="loss"), one, rewards, old, ref)
    assert in_loss.sequence_rewards == {0: 1.0, 1: 1.0}


def test_the_grpo_std_settings_reach_the_advantages() -> None:
    # Group 0: rewards 1, 3; unbiased std sqrt(2) -> advantages -1/sqrt(2), +1/sqrt(2) (population: -1, +1).
    s = AlgorithmSettings("grpo", std_ddof=1, std_eps=0.0)
    exp = make_experience(s, ROLLOUTS, REWARDS, OLD)
    assert float(exp.advantages[1][0]) == pytest.approx(1 / np.sqrt(2), rel=1e-6)


# One group of 2: response lengths 1 and 3, scores 1 and 2. Log-probs -1 against the reference's -1.5 and
# -4, -3, -2 give k1 KLs 0.5 and 3, 2, 1; coef 0.2 makes per-token penalties 0.1 and 0.6, 0.4, 0.2.
PAIR = [Rollout(10, 0, [1], [5]), Rollout(11, 0, [1], [5, 6, 7])]
PAIR_SCORES = {10: 1.0, 11: 2.0}
PAIR_OLD = {10: np.array([-1.0], np.float32), 11: np.full(3, -1.0, np.float32)}
PAIR_REF = {10: np.array([-1.5], np.float32), 11: np.array([-4.0, -3.0, -2.0], np.float32)}
ORLHF_GRPO = {"std_ddof": 1, "std_eps": 1e-9}  # OpenRLHF group_norm: torch.std (unbiased) + 1e-9


def pair_experience(algorithm: str, form: str, **kw):
    s = AlgorithmSettings(algorithm, kl_coef=0.2, kl_estimator="k1", kl_target="reward", kl_reward_form=form, **kw)  # type: ignore[arg-type]
    return make_experience(s, PAIR, PAIR_SCORES, PAIR_OLD, PAIR_REF)


def test_the_token_form_baselines_the_raw_score_then_adds_the_kl_to_go() -> None:
    # Baseline on the raw scores 1, 2: mean 1.5, unbiased std sqrt(0.5^2 * 2 / 1) = sqrt(0.5), so
    # h = 0.5 / (sqrt(0.5) + 1e-9) = 0.7071 and the baselined scores are -h, +h. h sits on the last token,
    # -0.2 x KL on every token; each token's advantage is the sum from it to the end (gamma 1):
    # rollout 10: -h - 0.1; rollout 11: h - (0.6 + 0.4 + 0.2), h - (0.4 + 0.2), h - 0.2.
    exp = pair_experience("grpo", "token", **ORLHF_GRPO)
    h = 0.5 / (np.sqrt(0.5) + 1e-9)
    np.testing.assert_allclose(exp.advantages[10], [-h - 0.1], rtol=1e-6)
    np.testing.assert_allclose(exp.advantages[11], [h - 1.2, h - 0.6, h - 0.2], rtol=1e-5)
    # Still verl's critic/rewards/mean input: score - coef x summed KL (1 - 0.1, 2 - 1.2).
    assert exp.sequence_rewards == pytest.approx({10: 0.9, 11: 0.8})


def test_the_sequence_form_is_unchanged_and_takes_the_kl_off_before_the_baseline() -> None:
    # Penalised scores 1 - 0.1 = 0.9 and 2 - 1.2 = 0.8: the longer response now ranks lower. Mean 0.85,
    # unbiased std sqrt(0.05^2 * 2) = 0.0707, advantages +-0.05 / (0.0707 + 1e-9) = +-0.7071 on every token.
    exp = pair_experience("grpo", "sequence", **ORLHF_GRPO)
    a = 0.05 / (np.sqrt(0.005) + 1e-9)
    np.testing.assert_allclose(exp.advantages[10], [a], rtol=1e-5)
    np.testing.assert_allclose(exp.advantages[11], [-a, -a, -a], rtol=1e-5)
    assert exp.sequence_rewards == pytest.approx({10: 0.9, 11: 0.8})


def test_rloo_in_the_token_form() -> None:
    # Leave-one-out on the raw scores: 1 - 2 = -1 and 2 - 1 = +1 (no std). Then the KL to go as above:
    # rollout 10: -1 - 0.1; rollout 11: 1 - 1.2, 1 - 0.6, 1 - 0.2. (Sequence form: 0.9 - 0.8 = +-0.1 flat.)
    exp = pair_experience("rloo", "token")
    np.testing.assert_allclose(exp.advantages[10], [-1.1], rtol=1e-6)
    np.testing.assert_allclose(exp.advantages[11], [-0.2, 0.4, 0.8], rtol=1e-5, atol=1e-6)
    flat = pair_experience("rloo", "sequence")
    np.testing.assert_allclose(flat.advantages[11], [-0.1] * 3, rtol=1e-5)


def test_the_reward_form_does_not_apply_to_ppo_or_to_the_kl_in_the_loss() -> None:
    values = {10: np.zeros(1, np.float32), 11: np.zeros(3, np.float32)}
    ppo = [
        make_experience(
            AlgorithmSettings("ppo", 1.0, 1.0, 0.2, "k1", "reward", kl_reward_form=form),
            PAIR,
            PAIR_SCORES,
            PAIR_OLD,
            PAIR_REF,
            values,
        )
        for form in ("sequence", "token")
    ]
    assert ppo[0].returns is not None and ppo[1].returns is not None
    np.testing.assert_array_equal(ppo[0].returns[11], ppo[1].returns[11])
    np.testing.assert_allclose(ppo[0].returns[11], [2 - 1.2, 2 - 0.6, 2 - 0.2], rtol=1e-5)
    in_loss = [
        make_experience(
            AlgorithmSettings("grpo", kl_coef=0.2, kl_target="loss", kl_reward_form=form),
            PAIR,
            PAIR_SCORES,
            PAIR_OLD,
            PAIR_REF,
        )
        for form in ("sequence", "token")
    ]
    np.testing.assert_array_equal(in_loss[1].advantages[11], in_loss[0].advantages[11])
    assert len(set(in_loss[1].advantages[11].tolist())) == 1  # flat: the KL is not in the reward
