"""The actor loss on hand-worked numbers: the aggregation modes on a ragged batch, their invariance to
micro-batching, and the surrogate and KL parts kept apart (verl's actor/pg_loss vs actor/kl_loss)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlsim.algorithms.actor_loss import SurrogateSettings, actor_loss
from rlsim.algorithms.aggregation import token_weights
from rlsim.algorithms.experience import AlgorithmSettings

# Two sequences of 1 and 3 tokens with per-token losses 4 | 1, 2, 3 (sums 4 and 6, 4 tokens in all).
LENGTHS = [1, 3]
LOSSES = np.array([4.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    ("mode", "scale", "expected"),
    [
        ("token-mean", None, 10 / 4),  # (4 + 6) / 4 tokens
        ("seq-mean-token-mean", None, (4 / 1 + 6 / 3) / 2),  # = 3
        ("seq-mean-token-sum", None, (4 + 6) / 2),  # = 5
        ("seq-mean-token-sum-norm", 4.0, (4 + 6) / (2 * 4)),  # Dr. GRPO: / (sequences x constant) = 1.25
    ],
)
def test_each_aggregation_mode_on_a_ragged_batch(mode: str, scale: float | None, expected: float) -> None:
    w = token_weights(LENGTHS, mode, batch_sequences=2, batch_tokens=4, scale=scale)  # type: ignore[arg-type]
    assert w.shape == (4,) and float((w * LOSSES).sum()) == pytest.approx(expected)
    # The same sequences one per micro-batch, each weighted against the whole batch: the same total.
    parts = token_weights([1], mode, 2, 4, scale), token_weights([3], mode, 2, 4, scale)  # type: ignore[arg-type]
    assert float((parts[0] * LOSSES[:1]).sum() + (parts[1] * LOSSES[1:]).sum()) == pytest.approx(expected)


def test_bad_aggregation_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="positive constant scale"):
        token_weights(LENGTHS, "seq-mean-token-sum-norm", 2, 4, None)
    with pytest.raises(ValueError, match="valid: token-mean"):
        token_weights(LENGTHS, "sum", 2, 4)  # type: ignore[arg-type]


def test_the_kl_in_the_loss_is_not_part_of_the_surrogate() -> None:
    # Ratio 1, advantage 0, logp -1, ref -2, coef 0.1, k3: log r = -1, k3 = e^-1 - 1 + 1 = 0.3679. The
    # total loss is 0.1 x 0.3679 = 0.0368 (rlsim's train.loss); the surrogate (verl's actor/pg_loss) is 0.
    alg = AlgorithmSettings("grpo", kl_coef=0.1, kl_estimator="k3", kl_target="loss")
    logp = torch.tensor([-1.0], requires_grad=True)
    old, ref = torch.tensor([-1.0]), torch.tensor([-2.0])
    out = actor_loss(logp, old, torch.zeros(1), [1], (1, 1), SurrogateSettings(), alg, ref)
    assert out.kl_loss is not None and float(out.kl_loss.detach()) == pytest.approx(math.exp(-1), rel=1e-6)
    assert float(out.policy_loss.detach()) == 0.0
    total = float(out.loss.detach())
    assert total == pytest.approx(0.1 * math.exp(-1), rel=1e-6) and round(total, 4) == 0.0368
    with pytest.raises(ValueError, match="reference"):
        actor_loss(logp, logp.detach(), torch.zeros(1), [1], (1, 1), SurrogateSettings(), alg)


def test_without_the_kl_in_the_loss_the_loss_is_the_surrogate_and_agg_applies() -> None:
    # Advantages +1 on both sequences, ratio 1 everywhere: per-token loss -1; seq-mean-token-sum over
    # sequences of 1 and 3 tokens: (-1 + -3) / 2 = -2 (token-mean would give -1).
    s = SurrogateSettings(loss_agg="seq-mean-token-sum")
    z = torch.zeros(4)
    out = actor_loss(z, z, torch.ones(4), LENGTHS, (2, 4), s, AlgorithmSettings("grpo", kl_target="reward"))
    assert out.kl_loss is None and float(out.loss) == pytest.approx(-2.0) and out.loss is out.policy_loss
