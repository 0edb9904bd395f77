"""Score the fidelity corpus with a runtime and judge its rewards against fp32 eager's.

Pass rules (``FidelityRules``): an fp32 runtime must match the reference to ``fp32_max_abs_diff``;
a reduced-precision one (``RuntimeInfo.reduced_precision``) passes when within-group pair flips stay at
or under ``max_pair_flip_rate`` and Spearman at or over ``min_spearman``: a reward model's job in
GRPO/PPO is to order a group's samples, so these two say whether the training signal survives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rlsim.corpus.fidelity_corpus import FidelityCorpus, build_corpus
from rlsim.errors import RlsimError
from rlsim.fidelity.metrics import FidelityMetrics, fidelity_metrics
from rlsim.scoring.base import SCORERS, UnsupportedRuntime, make_scorer

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec
    from rlsim.scoring.base import ScorerSettings

SCORE_BATCH = 16


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


def corpus_fidelity(reference: np.ndarray, candidate: np.ndarray, corpus: FidelityCorpus) -> FidelityMetrics:
    return fidelity_metrics(reference, candidate, corpus.groups)


def runtime_fidelity(
    spec: RewardModelSpec,
    runtimes: Sequence[str],
    settings: ScorerSettings,
    rules: FidelityRules | None = None,
    corpus: FidelityCorpus | None = None,
) -> dict[str, dict]:
    """Each runtime's fidelity on the corpus against eager's: ``{name: {metrics..., "ok": bool}}``.

    A runtime this machine cannot run gets ``{"skipped": reason}``, one that fails ``{"error": message}``;
    ``http`` is judged by the runtime its server wraps, so it is not scored again here.
    """
    rules = rules or FidelityRules()
    corpus = corpus or build_corpus()
    reference = _score_with("eager", spec, settings, corpus.texts)
    out: dict[str, dict] = {}
    for name in dict.fromkeys(runtimes):
        if SCORERS.info(name).server:
            out[name] = {"skipped": f"{name} scores with the runtime its server wraps ({settings.server_runtime})"}
            continue
        try:
            rewards = reference if name == "eager" else _score_with(name, spec, settings, corpus.texts)
            metrics = fidelity_metrics(reference, rewards, corpus.groups)
        except UnsupportedRuntime as err:
            out[name] = {"skipped": str(err)}
            continue
        except (RlsimError, ValueError) as err:
            out[name] = {"error": str(err), "ok": False}
            continue
        out[name] = {**metrics.as_dict(), "ok": rules.passes(SCORERS.info(name).reduced_precision, metrics)}
    return out


def _score_with(runtime: str, spec: RewardModelSpec, settings: ScorerSettings, texts: Sequence[str]) -> np.ndarray:
    scorer = make_scorer(runtime, spec, settings)
    try:
        return score_in_length_order(scorer, texts)
    finally:
        scorer.close()
