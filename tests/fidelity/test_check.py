"""The pass rules, and scoring the corpus in length order without mixing up whose reward is whose."""

import numpy as np
import pytest

from rlsim.fidelity.check import FidelityRules, score_in_length_order
from rlsim.fidelity.metrics import fidelity_metrics

REF = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
GROUPS = np.array([0, 0, 0, 0, 1, 1, 1, 1])


def test_reduced_precision_is_judged_by_pair_flips_and_spearman():
    # One swap of neighbours inside group 0: 1 of 12 within-group pairs flips (8.3%);
    # rank differences (0, 1, 1, 0, ...) -> Spearman 1 - 6 * 2 / (8 * 63) = 0.97619.
    swapped = fidelity_metrics(REF, np.array([1.0, 3.0, 2.0, 4.0, 5.0, 6.0, 7.0, 8.0]), GROUPS)
    assert swapped.pair_flip_rate == pytest.approx(1 / 12)
    assert swapped.spearman == pytest.approx(1 - 12 / 504)
    assert not FidelityRules().passes(True, swapped)
    assert FidelityRules(max_pair_flip_rate=0.09, min_spearman=0.97).passes(True, swapped)
    assert not FidelityRules(max_pair_flip_rate=0.09, min_spearman=0.98).passes(True, swapped)
    # Order kept but values off by 0.01: reduced precision passes, fp32 does not (max |diff| 1e-2 > 1e-4).
    shifted = fidelity_metrics(REF, REF + 0.01, GROUPS)
    assert FidelityRules().passes(True, shifted) and not FidelityRules().passes(False, shifted)
    assert FidelityRules().passes(False, fidelity_metrics(REF, REF + 5e-5, GROUPS))


class _LengthRecorder:
    """A scorer whose reward is the text's length, recording each batch it is given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def score_batch(self, texts):
        self.batches.append(list(texts))
        return np.array([float(len(t)) for t in texts], dtype=np.float32)


def test_length_order_batches_and_rewards_return_in_input_order():
    texts = ["x" * n for n in (5, 1, 9, 3, 7, 2, 8)]
    scorer = _LengthRecorder()
    rewards = score_in_length_order(scorer, texts, batch=3)
    assert rewards.tolist() == [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0]
    assert [[len(t) for t in b] for b in scorer.batches] == [[1, 2, 3], [5, 7, 8], [9]]
