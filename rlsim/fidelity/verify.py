"""Check every runtime against the fp32 PyTorch eager reference on one fixed batch.

fp32 runtimes pass at ``max_abs_diff <= FP32_ABS_TOL``. Reduced-precision runtimes (int8, bf16,
fp16: ``RuntimeInfo.reduced_precision``) are *expected* to deviate: their deviation and Spearman
rank correlation with the reference are reported, and they pass when the ranking mostly survives
(``INT8_MIN_SPEARMAN``), since a reward's job is to rank. With ``fidelity`` rules the runtimes also score the
fidelity corpus (``rlsim.corpus``) and reduced precision is judged by its within-group pair flips and Spearman
there instead; a runtime this machine cannot run is reported as skipped, with the reason.

The engine of ``rlsim verify``: it judges the runtimes, so it lives with the fidelity checks, beside scoring rather
than in it (``tests/test_import_rules.py``: scoring imports nothing of rlsim.fidelity).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from rlsim.corpus.agreement import FidelityRules, fidelity_metrics, score_in_length_order, spearman
from rlsim.corpus.fidelity_corpus import FidelityCorpus, build_corpus
from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.models.reward_head import read_report
from rlsim.scoring.base import SCORERS, ScorerSettings, UnsupportedRuntime, make_scorer

FP32_ABS_TOL = 1e-4
INT8_MIN_SPEARMAN = 0.8
REFERENCE = "eager"


def verification_texts() -> list[str]:
    """A fixed batch with lengths from one word to past the 512-token limit (exercises truncation)."""
    base = [
        "Yes.",
        "The capital of France is Paris.",
        "Q: What is 17 * 3? A: 17 * 3 = 51, because 17 * 3 = 10 * 3 + 7 * 3 = 30 + 21.",
        "I cannot help with that request, but here is a safer alternative you might consider instead.",
        "Sure! Here is a short poem about the sea: waves fold over waves, and the salt wind hums along.",
        "def add(a, b):\n    return a + b\n# Adds two numbers; works for ints, floats and strings.",
        "Naïve café owners in Zürich serve crème brûlée — 美味しい — with emoji 🍮 on Sundays.",
        "Step 1: read the question. Step 2: think. Step 3: answer carefully and check the result.",
    ]
    medium = " ".join(f"Sentence {i} explains one more detail of the answer in plain words." for i in range(12))
    long = " ".join(f"Paragraph {i}: the policy wrote a long and rambling response here." for i in range(80))
    return base + [medium, long, "", "ok " * 40]


@dataclass
class RuntimeResult:
    ok: bool
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    spearman: float | None = None
    int8: bool = False
    precision: str = "fp32"
    skipped: bool = False  # this machine cannot run it (missing CPU flag, no GPU): not a failure
    fidelity: dict | None = None
    load_s: float = 0.0
    compile_s: float = 0.0
    score_s: float = 0.0
    truncated: int = 0
    error: str | None = None


@dataclass
class Verification:
    model: str
    reference: str
    texts: int
    runtimes: dict[str, RuntimeResult] = field(default_factory=dict)
    rules: FidelityRules | None = None
    corpus: dict | None = None
    reward_head: dict | None = None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runtimes.values() if not r.skipped)

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "reference": self.reference,
            "texts": self.texts,
            "tolerances": {"fp32_max_abs_diff": FP32_ABS_TOL, "int8_min_spearman": INT8_MIN_SPEARMAN},
            "fidelity_rules": self.rules.as_dict() if self.rules else None,
            "fidelity_corpus": self.corpus,
            "reward_head": self.reward_head,
            "ok": self.ok,
            "runtimes": {k: asdict(v) for k, v in self.runtimes.items()},
        }


def verify(
    spec: RewardModelSpec,
    runtimes: Sequence[str],
    settings: ScorerSettings,
    texts: Sequence[str] | None = None,
    on_done: Callable[[str, RuntimeResult], None] | None = None,
    fidelity: FidelityRules | None = None,
) -> Verification:
    """Each runtime against eager on ``texts`` (default: ``verification_texts()``), and with
    ``fidelity`` on the fidelity corpus too."""
    texts = list(texts) if texts is not None else verification_texts()
    corpus = build_corpus() if fidelity else None
    ref_scorer = make_scorer(REFERENCE, spec, settings)
    reference = _References(ref_scorer.score_batch(texts), _score_corpus(ref_scorer, corpus))
    ref_scorer.close()
    report = Verification(model=spec.name, reference=REFERENCE, texts=len(texts), rules=fidelity)
    report.reward_head = _head_summary(spec)
    if corpus is not None:
        report.corpus = {"texts": len(corpus.texts), "groups": corpus.group_count, "digest": corpus.digest}
    for name in runtimes:
        result = _check_runtime(name, spec, settings, texts, reference, corpus, fidelity)
        report.runtimes[name] = result
        if on_done:
            on_done(name, result)
    return report


@dataclass
class _References:
    batch: np.ndarray
    corpus: np.ndarray | None


def _score_corpus(scorer, corpus: FidelityCorpus | None) -> np.ndarray | None:
    return None if corpus is None else score_in_length_order(scorer, corpus.texts)


def _head_summary(spec: RewardModelSpec) -> dict | None:
    head = read_report(spec.path)
    if head is None:
        return None
    return {k: head[k] for k in ("task", "heldout_pairs", "heldout_accuracy", "train_accuracy") if k in head}


def _check_runtime(
    name: str,
    spec: RewardModelSpec,
    settings: ScorerSettings,
    texts: Sequence[str],
    reference: _References,
    corpus: FidelityCorpus | None,
    rules: FidelityRules | None,
) -> RuntimeResult:
    info = SCORERS.info(name)
    reduced = info.reduced_precision  # judged by rank, not by value
    int8, precision = info.precision == "int8", info.precision or "fp32"
    try:
        scorer = make_scorer(name, spec, settings)
        try:
            t0 = time.perf_counter()
            scores = scorer.score_batch(texts)
            elapsed = time.perf_counter() - t0
            corpus_scores = _score_corpus(scorer, corpus)
        finally:
            scorer.close()
    except UnsupportedRuntime as err:
        return RuntimeResult(ok=False, skipped=True, error=str(err), int8=int8, precision=precision)
    except RlsimError as err:
        return RuntimeResult(ok=False, error=str(err), int8=int8, precision=precision)
    diff = np.abs(scores.astype(np.float64) - reference.batch)
    rel = diff / np.maximum(np.abs(reference.batch), 1e-6)
    rho = spearman(scores, reference.batch)
    finite = bool(np.all(np.isfinite(scores))) and (corpus_scores is None or bool(np.all(np.isfinite(corpus_scores))))
    ok = finite and (rho >= INT8_MIN_SPEARMAN if reduced else float(diff.max()) <= FP32_ABS_TOL)
    fidelity = None
    if finite and corpus is not None and rules is not None:
        assert reference.corpus is not None and corpus_scores is not None  # both scored when there is a corpus
        metrics = fidelity_metrics(reference.corpus, corpus_scores, corpus.groups)
        passes = rules.passes(reduced, metrics)
        ok = passes if reduced else ok and passes
        fidelity = {**metrics.as_dict(), "ok": passes}
    return RuntimeResult(
        ok=ok,
        max_abs_diff=float(diff.max()),
        max_rel_diff=float(rel.max()),
        spearman=rho,
        fidelity=fidelity,
        load_s=scorer.stats.load_s,
        compile_s=scorer.stats.compile_s,
        score_s=elapsed,
        truncated=scorer.stats.truncated,
        error=None if finite else "non-finite rewards",
        int8=int8,
        precision=precision,
    )
