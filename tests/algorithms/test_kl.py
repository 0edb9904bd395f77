"""k1 and k3 against the closed-form KL of two categorical distributions.

Taking the expectation over every outcome x weighted by p(x) (exact, no sampling):
E_p[k1] = sum p log(p/q) = KL(p||q); E_p[k3] = sum p (q/p - 1 - log(q/p)) = sum q - 1 + KL = KL(p||q).
"""

from __future__ import annotations

import math

import pytest
import torch

from rlsim.algorithms.kl import kl_per_token

P = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
Q = torch.tensor([0.2, 0.2, 0.6], dtype=torch.float64)
KL_PQ = 0.5 * math.log(0.5 / 0.2) + 0.3 * math.log(0.3 / 0.2) + 0.2 * math.log(0.2 / 0.6)


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_expectation_under_p_is_the_exact_kl(estimator: str) -> None:
    per_outcome = kl_per_token(P.log(), Q.log(), estimator)
    assert float((P * per_outcome).sum()) == pytest.approx(KL_PQ, abs=1e-12)
    assert KL_PQ == pytest.approx(
        float(
            torch.distributions.kl_divergence(
                torch.distributions.Categorical(probs=P), torch.distributions.Categorical(probs=Q)
            )
        ),
        abs=1e-12,
    )


def test_k1_can_be_negative_per_token_and_k3_cannot() -> None:
    k1 = kl_per_token(P.log(), Q.log(), "k1")
    k3 = kl_per_token(P.log(), Q.log(), "k3")
    assert float(k1.min()) < 0  # outcome 3: log(0.2 / 0.6)
    assert float(k3.min()) >= 0
    # Outcome 1 by hand: r = 0.2 / 0.5 = 0.4 -> k3 = 0.4 - 1 - log 0.4.
    assert float(k3[0]) == pytest.approx(0.4 - 1 - math.log(0.4), abs=1e-12)


def test_identical_distributions_give_zero() -> None:
    for est in ("k1", "k3"):
        assert float(kl_per_token(P.log(), P.log(), est).abs().max()) == 0.0


def test_unknown_estimator_is_refused() -> None:
    with pytest.raises(ValueError, match="k1, k3"):
        kl_per_token(P.log(), Q.log(), "k2")  # type: ignore[arg-type]
