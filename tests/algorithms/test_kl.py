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
    with pytest.raises(ValueError, match="k1, k2, k3, k3"):
        kl_per_token(P.log(), Q.log(), "k4")  # type: ignore[arg-type]


def test_k2_is_half_the_squared_log_ratio() -> None:
    # Outcome 1: log(0.5 / 0.2) = 0.9163; k2 = 0.9163^2 / 2 = 0.4198.
    k2 = kl_per_token(P.log(), Q.log(), "k2")
    assert float(k2[0]) == pytest.approx(0.5 * math.log(2.5) ** 2, abs=1e-12)
    assert float(k2.min()) >= 0


def val(t: torch.Tensor) -> float:
    return float(t.detach().sum())


def test_the_kl_tail_of_one_rare_token_and_its_clamps() -> None:
    # logp -9 against ref -0.5: log r = 8.5, k3 = e^8.5 - 1 - 8.5 = 4905.3, d k3 / d logp = -(e^8.5 - 1) = -4913.8.
    logp = torch.tensor([-9.0], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([-0.5], dtype=torch.float64)
    k3 = kl_per_token(logp, ref, "k3")
    (grad,) = torch.autograd.grad(k3.sum(), logp)
    assert val(k3) == pytest.approx(math.exp(8.5) - 9.5, rel=1e-12) and 4905 < val(k3) < 4906
    assert float(grad) == pytest.approx(-(math.exp(8.5) - 1), rel=1e-12)
    # verl's k3 (low_var_kl): the estimate clamped to [-10, 10], so no gradient flows from this token.
    clamped = kl_per_token(logp, ref, "k3", clamp=10.0)
    (grad,) = torch.autograd.grad(clamped.sum(), logp)
    assert val(clamped) == 10.0 and float(grad) == 0.0
    # A log-ratio clamp at 5 (rlsim's is 20): k3 = e^5 - 1 - 5 = 142.41.
    assert val(kl_per_token(logp, ref, "k3", log_ratio_clamp=5.0)) == pytest.approx(math.exp(5) - 6, rel=1e-12)
    # OpenRLHF clamps every estimator: k1 = -8.5 stays, k2 = 36.125 becomes 10.
    assert val(kl_per_token(logp, ref, "k1", clamp=10.0)) == -8.5
    assert val(kl_per_token(logp, ref, "k2", clamp=10.0)) == 10.0


def test_k3_plus_has_k3s_value_and_k2s_gradient() -> None:
    # d k2 / d logp = logp - ref = -8.5 at logp -9, ref -0.5 (k3's own gradient is -4913.8).
    logp = torch.tensor([-9.0, -1.0], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([-0.5, -1.0], dtype=torch.float64)
    st = kl_per_token(logp, ref, "k3+")
    (grad,) = torch.autograd.grad(st.sum(), logp)
    torch.testing.assert_close(st.detach(), kl_per_token(logp, ref, "k3").detach())
    torch.testing.assert_close(grad, torch.tensor([-8.5, 0.0], dtype=torch.float64))
