"""How far a runtime's rewards are from the reference's, in the terms RLHF training cares about, and when that is
close enough.

GRPO and PPO with group baselines use a reward model to *order* the samples of a group (the
responses to one prompt), so next to global rank correlation this measures what happens inside
groups: how many pairs swap order, and how the group-normalised advantages move. All functions
take float arrays of rewards, shape ``(n,)``, and integer group ids, shape ``(n,)``.

Worked example (used in the tests): reference ``[1, 2, 3, 4]``, candidate ``[1, 3, 2, 4]``, one
group. Ranks differ at two places by 1: Spearman ``1 - 6 * 2 / (4 * 15) = 0.8``; of the 6 pairs
one is discordant: Kendall tau ``(5 - 1) / 6 = 0.667``, pair-flip rate ``1/6``.

Pass rules (``FidelityRules``): an fp32 runtime must match the reference to ``fp32_max_abs_diff``;
a reduced-precision one (``RuntimeInfo.reduced_precision``) passes when within-group pair flips stay at
or under ``max_pair_flip_rate`` and Spearman at or over ``min_spearman``: a reward model's job in
GRPO/PPO is to order a group's samples, so these two say whether the training signal survives.
``score_in_length_order`` gives every runtime compared the same batches of a corpus.

The yardstick beside the corpus it is applied to: the fidelity checks (``rlsim.fidelity``) judge runtimes by it
and the int8-mixed runtime (``rlsim.scoring.int8_sensitivity``) chooses its fp32 layers by it, so it is plain
numpy that imports neither (``tests/test_import_rules.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np

from rlsim.algorithms.advantages import group_advantages

SCORE_BATCH = 16


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based; ties share the mean of their positions)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x), dtype=np.float64)
    r[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        if tied.sum() > 1:
            r[tied] = r[tied].mean()
    return r


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation: Pearson correlation of the average ranks (tie-corrected)."""
    if len(a) < 2:
        return 1.0
    r = np.corrcoef(ranks(a), ranks(b))[0, 1]
    return 1.0 if math.isnan(r) else float(r)


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b over all pairs: (concordant - discordant) / sqrt((n0 - ties_a)(n0 - ties_b))."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    i, j = np.triu_indices(len(a), k=1)
    sa, sb = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    denom = math.sqrt(float(np.count_nonzero(sa)) * float(np.count_nonzero(sb)))
    return 1.0 if denom == 0 else float((sa * sb).sum() / denom)


def pair_flip_rate(reference: np.ndarray, candidate: np.ndarray, groups: np.ndarray) -> float:
    """Fraction of within-group pairs whose order differs (a tie on one side and not the other counts)."""
    flips = pairs = 0
    ref, cand = np.asarray(reference), np.asarray(candidate)
    for members in _group_members(groups):
        for i, j in combinations(members, 2):
            pairs += 1
            flips += np.sign(ref[i] - ref[j]) != np.sign(cand[i] - cand[j])
    return float(flips) / pairs if pairs else 0.0


def advantage_errors(reference: np.ndarray, candidate: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """GRPO advantages ``(r - mean_g) / std_g`` from each: (fraction of samples whose sign differs, mean |diff|).

    A zero advantage on one side and not the other counts as a sign flip.
    """
    adv_ref = group_advantages(groups, reference).astype(np.float64)
    adv_cand = group_advantages(groups, candidate).astype(np.float64)
    sign_flips = float(np.mean(np.sign(adv_ref) != np.sign(adv_cand)))
    return sign_flips, float(np.mean(np.abs(adv_ref - adv_cand)))


def reward_mae_over_std(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Mean |reward difference| in units of the reference rewards' standard deviation (ddof=0)."""
    ref = np.asarray(reference, dtype=np.float64)
    std = float(ref.std())
    mae = float(np.mean(np.abs(np.asarray(candidate, dtype=np.float64) - ref)))
    return 0.0 if mae == 0 else (mae / std if std > 0 else math.inf)


def _group_members(groups: np.ndarray) -> list[list[int]]:
    g = np.asarray(groups)
    return [np.flatnonzero(g == gid).tolist() for gid in np.unique(g)]


@dataclass(frozen=True)
class FidelityMetrics:
    """One runtime's rewards against the reference's on the fidelity corpus (keys as in the JSON)."""

    spearman: float
    kendall_tau: float
    pair_flip_rate: float
    advantage_sign_flip_rate: float
    advantage_mae: float
    reward_mae_over_std: float
    max_abs_diff: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def fidelity_metrics(reference: np.ndarray, candidate: np.ndarray, groups: np.ndarray) -> FidelityMetrics:
    """Every metric above; raises ``ValueError`` on mismatched shapes or non-finite rewards."""
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if ref.shape != cand.shape or ref.shape != np.asarray(groups).shape:
        raise ValueError(f"shapes differ: reference {ref.shape}, candidate {cand.shape}, groups {np.shape(groups)}")
    if not np.all(np.isfinite(cand)):
        raise ValueError("the candidate runtime returned non-finite rewards")
    sign_flips, adv_mae = advantage_errors(ref, cand, groups)
    return FidelityMetrics(
        spearman=spearman(ref, cand),
        kendall_tau=kendall_tau(ref, cand),
        pair_flip_rate=pair_flip_rate(ref, cand, groups),
        advantage_sign_flip_rate=sign_flips,
        advantage_mae=adv_mae,
        reward_mae_over_std=reward_mae_over_std(ref, cand),
        max_abs_diff=float(np.max(np.abs(ref - cand))) if len(ref) else 0.0,
    )


@dataclass(frozen=True)
class FidelityRules:
    max_pair_flip_rate: float = 0.02
    min_spearman: float = 0.99
    fp32_max_abs_diff: float = 1e-4

    def passes(self, reduced_precision: bool, metrics: FidelityMetrics) -> bool:
        return not self.failures(reduced_precision, metrics)

    def failures(self, reduced_precision: bool, metrics: FidelityMetrics) -> list[str]:
        """Each rule ``metrics`` breaks, in words (``pair flips 11.6% > 2.0%``); empty when it passes."""
        if not reduced_precision:
            if metrics.max_abs_diff <= self.fp32_max_abs_diff:
                return []
            return [f"max |diff| {metrics.max_abs_diff:.2e} > {self.fp32_max_abs_diff:.0e} (fp32)"]
        out = []
        if metrics.pair_flip_rate > self.max_pair_flip_rate:
            out.append(f"pair flips {metrics.pair_flip_rate:.1%} > {self.max_pair_flip_rate:.1%}")
        if metrics.spearman < self.min_spearman:
            out.append(f"Spearman {metrics.spearman:.4f} < {self.min_spearman:g}")
        return out

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def score_in_length_order(scorer, texts: Sequence[str], batch: int = SCORE_BATCH) -> np.ndarray:
    """Rewards for ``texts`` in input order, scored ``batch`` at a time sorted by length (little padding).

    Every runtime gets the same batches, so differences come from the runtime, not the batching.
    """
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    out = np.empty(len(texts), dtype=np.float64)
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        out[idx] = scorer.score_batch([texts[i] for i in idx])
    return out
