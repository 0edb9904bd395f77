"""Each fidelity metric against an example worked out by hand (the working is in the comments), the pass rules, and
scoring a corpus in length order without mixing up whose reward is whose."""

import math

import numpy as np
import pytest

from rlsim.corpus.agreement import (
    FidelityRules,
    advantage_errors,
    fidelity_metrics,
    kendall_tau,
    pair_flip_rate,
    ranks,
    reward_mae_over_std,
    score_in_length_order,
    spearman,
)

REF = np.array([1.0, 2.0, 3.0, 4.0])
SWAP_MIDDLE = np.array([1.0, 3.0, 2.0, 4.0])


def test_ranks_average_ties():
    assert ranks(np.array([5.0, 1.0, 5.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]


def test_spearman_swap_of_two_neighbours():
    # Rank differences d = (0, 1, 1, 0): rho = 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 12 / 60 = 0.8.
    assert spearman(REF, SWAP_MIDDLE) == pytest.approx(0.8)
    assert spearman(REF, -REF) == pytest.approx(-1.0)
    assert spearman(REF, REF * 10 + 3) == pytest.approx(1.0)


def test_kendall_tau_one_discordant_pair_of_six():
    # Pairs of 4 items: 6; only (2nd, 3rd) is ordered differently: tau = (5 - 1) / 6.
    assert kendall_tau(REF, SWAP_MIDDLE) == pytest.approx(4 / 6)
    # tau-b with a tie in the candidate: pairs 6, candidate ties 1 -> (5 - 0) / sqrt(6 * 5).
    assert kendall_tau(REF, np.array([1.0, 2.0, 2.0, 4.0])) == pytest.approx(5 / math.sqrt(30))


def test_pair_flips_count_only_within_groups():
    groups = np.array([0, 0, 1, 1])
    # Group 0 (rewards 1, 2) swaps, group 1 (3, 4) keeps its order: 1 of 2 within-group pairs.
    assert pair_flip_rate(REF, np.array([2.0, 1.0, 3.0, 4.0]), groups) == pytest.approx(0.5)
    # Swapping items of *different* groups (2nd and 3rd) changes no within-group order.
    assert pair_flip_rate(REF, SWAP_MIDDLE, groups) == 0.0
    # One group of four: 1 flipped pair of 6.
    assert pair_flip_rate(REF, SWAP_MIDDLE, np.zeros(4, dtype=int)) == pytest.approx(1 / 6)


def test_advantage_sign_flips_and_mae_by_hand():
    # Group (0, 1, 2): mean 1, std sqrt(2/3) -> advantages (-1.2247, 0, 1.2247).
    # Candidate (0, 1.5, 2): mean 7/6, centred (-7/6, 1/3, 5/6), std sqrt(13/18) = 0.84984
    #   -> advantages (-1.37281, 0.39223, 0.98058).
    # Signs: (-, 0, +) vs (-, +, +): the middle one flips, 1 of 3.
    # |diff| = (0.14807, 0.39223, 0.24416) -> mean 0.26149.
    ref = np.array([0.0, 1.0, 2.0])
    cand = np.array([0.0, 1.5, 2.0])
    flips, mae = advantage_errors(ref, cand, np.zeros(3, dtype=int))
    assert flips == pytest.approx(1 / 3)
    assert mae == pytest.approx(0.26149, abs=1e-4)


def test_reward_mae_over_std():
    # MAE of (0, 1, 1, 0) is 0.5; the reference's std (ddof 0) is sqrt(1.25) = 1.1180 -> 0.44721.
    assert reward_mae_over_std(REF, SWAP_MIDDLE) == pytest.approx(0.5 / math.sqrt(1.25))
    assert reward_mae_over_std(REF, REF) == 0.0


def test_identical_rewards_are_perfect_and_bad_input_raises():
    groups = np.array([0, 0, 1, 1])
    m = fidelity_metrics(REF, REF.copy(), groups)
    assert (m.spearman, m.kendall_tau, m.pair_flip_rate, m.advantage_sign_flip_rate) == (1.0, 1.0, 0.0, 0.0)
    assert m.advantage_mae == 0.0 and m.reward_mae_over_std == 0.0 and m.max_abs_diff == 0.0
    with pytest.raises(ValueError, match="non-finite"):
        fidelity_metrics(REF, np.array([1.0, np.nan, 3.0, 4.0]), groups)
    with pytest.raises(ValueError, match="shapes differ"):
        fidelity_metrics(REF, REF[:3], groups)


REF8 = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
GROUPS8 = np.array([0, 0, 0, 0, 1, 1, 1, 1])


def test_reduced_precision_is_judged_by_pair_flips_and_spearman():
    # One swap of neighbours inside group 0: 1 of 12 within-group pairs flips (8.3%);
    # rank differences (0, 1, 1, 0, ...) -> Spearman 1 - 6 * 2 / (8 * 63) = 0.97619.
    swapped = fidelity_metrics(REF8, np.array([1.0, 3.0, 2.0, 4.0, 5.0, 6.0, 7.0, 8.0]), GROUPS8)
    assert swapped.pair_flip_rate == pytest.approx(1 / 12)
    assert swapped.spearman == pytest.approx(1 - 12 / 504)
    assert not FidelityRules().passes(True, swapped)
    assert FidelityRules(max_pair_flip_rate=0.09, min_spearman=0.97).passes(True, swapped)
    assert not FidelityRules(max_pair_flip_rate=0.09, min_spearman=0.98).passes(True, swapped)
    # Order kept but values off by 0.01: reduced precision passes, fp32 does not (max |diff| 1e-2 > 1e-4).
    shifted = fidelity_metrics(REF8, REF8 + 0.01, GROUPS8)
    assert FidelityRules().passes(True, shifted) and not FidelityRules().passes(False, shifted)
    assert FidelityRules().passes(False, fidelity_metrics(REF8, REF8 + 5e-5, GROUPS8))


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
