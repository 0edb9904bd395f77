"""The per-machine fidelity cache: a clean entry is read instead of scoring, anything else is measured again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rlsim.corpus.agreement import FidelityRules
from rlsim.corpus.fidelity_corpus import FidelityCorpus
from rlsim.fidelity.cache import cache_key, cached_runtime_fidelity, entry_path
from rlsim.scoring.base import ScorerSettings
from tests.helpers.fidelity_doubles import METRICS

CORPUS = FidelityCorpus(("a b c", "d e f"), np.array([0, 0]), seed=0)


@dataclass
class Spec:
    key: str = "minilm-rm-123-456"


class Measure:
    """Stands in for ``runtime_fidelity``: records what it was asked to score, answers fixed metrics."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def __call__(self, spec, runtimes, settings, rules, corpus):
        self.asked.append(list(runtimes))
        out = {}
        for rt in runtimes:
            if rt == "eager-fp16":
                out[rt] = {"skipped": "fp16 runs on cuda only"}
            else:
                out[rt] = {**METRICS, "ok": rules.passes(rt != "ort", _metrics())}
        return out


def _metrics():
    from rlsim.corpus.agreement import FidelityMetrics

    return FidelityMetrics(**METRICS)


def run(root: Path, measure: Measure, runtimes: list[str], rules: FidelityRules | None = None, **settings) -> dict:
    return cached_runtime_fidelity(
        Spec(),
        runtimes,
        ScorerSettings(**settings),
        rules,
        CORPUS,
        root=root,
        measure=measure,  # type: ignore[arg-type]
    )


def test_second_call_reads_the_cache_and_judges_with_its_own_rules(tmp_path: Path) -> None:
    measure = Measure()
    first = run(tmp_path, measure, ["ort-int8", "ort"])
    assert measure.asked == [["ort-int8", "ort"]]
    assert first["ort-int8"]["source"] == "measured" and first["ort-int8"]["ok"] is True
    second = run(tmp_path, measure, ["ort-int8", "ort"], FidelityRules(max_pair_flip_rate=0.01))
    assert measure.asked == [["ort-int8", "ort"]]  # nothing scored again
    assert second["ort-int8"]["source"] == "cache" and second["ort-int8"]["pair_flip_rate"] == 0.015
    assert second["ort-int8"]["ok"] is False  # 1.5% flips > the 1% asked for now
    assert second["ort"]["ok"] is False  # fp32: max |diff| 0.05 > 1e-4, whatever the rank rules


def test_anything_that_changes_the_rewards_misses_the_cache(tmp_path: Path) -> None:
    measure = Measure()
    run(tmp_path, measure, ["ort-int8"], threads=1)
    run(tmp_path, measure, ["ort-int8"], threads=2)  # another thread count
    run(tmp_path, measure, ["ort-int8"], threads=1, max_length=128)  # another truncation limit
    assert measure.asked == [["ort-int8"]] * 3
    run(tmp_path, measure, ["ort-int8", "eager"], threads=1)  # only the new runtime is scored
    assert measure.asked[-1] == ["eager"]


def test_a_broken_or_foreign_entry_is_measured_again_and_skips_are_not_cached(tmp_path: Path) -> None:
    measure = Measure()
    run(tmp_path, measure, ["ort-int8", "eager-fp16"], threads=1)
    key = cache_key(Spec(), "ort-int8", ScorerSettings(threads=1), CORPUS.digest)  # type: ignore[arg-type]
    entry_path(key, tmp_path).write_text("{truncated")
    again = run(tmp_path, measure, ["ort-int8", "eager-fp16"], threads=1)
    assert measure.asked[-1] == ["ort-int8", "eager-fp16"]
    assert again["eager-fp16"] == {"skipped": "fp16 runs on cuda only", "source": "measured"}
    assert key["cpu_flags"] is not None and key["versions"]["rlsim"]  # the machine and versions are in the key


@pytest.mark.parametrize("changed", ["model", "corpus"])
def test_model_weights_and_corpus_are_in_the_key(changed: str) -> None:
    base = cache_key(Spec(), "ort", ScorerSettings(), "digest1")  # type: ignore[arg-type]
    other = (
        cache_key(Spec(key="minilm-rm-999-456"), "ort", ScorerSettings(), "digest1")  # type: ignore[arg-type]
        if changed == "model"
        else cache_key(Spec(), "ort", ScorerSettings(), "digest2")  # type: ignore[arg-type]
    )
    assert entry_path(base, Path("/cache")) != entry_path(other, Path("/cache"))
