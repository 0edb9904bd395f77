"""Check every runtime against the fp32 PyTorch eager reference on one fixed batch.

fp32 runtimes pass at ``max_abs_diff <= FP32_ABS_TOL``. Quantized (int8) runtimes, as their registry
entry says, are *expected* to deviate:
their deviation and Spearman rank correlation with the reference are reported, and they pass
when the ranking mostly survives (``INT8_MIN_SPEARMAN``), since a reward's job is to rank.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.scoring.base import SCORERS, ScorerSettings, make_scorer

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

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runtimes.values())

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "reference": self.reference,
            "texts": self.texts,
            "tolerances": {"fp32_max_abs_diff": FP32_ABS_TOL, "int8_min_spearman": INT8_MIN_SPEARMAN},
            "ok": self.ok,
            "runtimes": {k: asdict(v) for k, v in self.runtimes.items()},
        }


def verify(
    spec: RewardModelSpec,
    runtimes: Sequence[str],
    settings: ScorerSettings,
    texts: Sequence[str] | None = None,
    on_done: Callable[[str, RuntimeResult], None] | None = None,
) -> Verification:
    texts = list(texts) if texts is not None else verification_texts()
    ref_scorer = make_scorer(REFERENCE, spec, settings)
    reference = ref_scorer.score_batch(texts)
    ref_scorer.close()
    report = Verification(model=spec.name, reference=REFERENCE, texts=len(texts))
    for name in runtimes:
        result = _check_runtime(name, spec, settings, texts, reference)
        report.runtimes[name] = result
        if on_done:
            on_done(name, result)
    return report


def _check_runtime(
    name: str, spec: RewardModelSpec, settings: ScorerSettings, texts: Sequence[str], reference: np.ndarray
) -> RuntimeResult:
    int8 = SCORERS.info(name).quantized  # quantized runtimes are judged by rank, not by value
    try:
        scorer = make_scorer(name, spec, settings)
        try:
            t0 = time.perf_counter()
            scores = scorer.score_batch(texts)
            elapsed = time.perf_counter() - t0
        finally:
            scorer.close()
    except RlsimError as err:
        return RuntimeResult(ok=False, int8=int8, error=str(err))
    diff = np.abs(scores.astype(np.float64) - reference)
    rel = diff / np.maximum(np.abs(reference), 1e-6)
    rho = spearman(scores, reference)
    finite = bool(np.all(np.isfinite(scores)))
    ok = finite and (rho >= INT8_MIN_SPEARMAN if int8 else float(diff.max()) <= FP32_ABS_TOL)
    return RuntimeResult(
        ok=ok,
        max_abs_diff=float(diff.max()),
        max_rel_diff=float(rel.max()),
        spearman=rho,
        int8=int8,
        load_s=scorer.stats.load_s,
        compile_s=scorer.stats.compile_s,
        score_s=elapsed,
        truncated=scorer.stats.truncated,
        error=None if finite else "non-finite rewards",
    )


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (no tie correction: rewards are continuous)."""
    if len(a) < 2:
        return 1.0
    ra = np.argsort(np.argsort(a)).astype(np.float64)
    rb = np.argsort(np.argsort(b)).astype(np.float64)
    r = np.corrcoef(ra, rb)[0, 1]
    return 1.0 if math.isnan(r) else float(r)
