"""Ranking runtimes by freed capacity among those that pass fidelity, on hand-made figures and verdicts."""

from __future__ import annotations

import pytest

from rlsim.experiment.config import ContentionConfig, ContentionSettings
from rlsim.experiment.fidelity_rank import fidelity_section, rank_runtimes, ranking_sentences
from rlsim.experiment.report import render_markdown
from rlsim.experiment.runner import build_results
from tests.helpers.recorded import POOL_CORES, rows

RULES = {"max_pair_flip_rate": 0.02, "min_spearman": 0.99, "fp32_max_abs_diff": 1e-4}


def est(mean: float | None, half: float = 0.1) -> dict:
    if mean is None:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "n": 3}


def figures(**freed: float | None) -> dict:
    """Per runtime the three figures the ranking reads; the rollouts/hour are 1000 x freed core-s."""
    return {
        name: {
            "freed_core_s": est(f),
            "freed_pool_share": est(None if f is None else f / 20),
            "extra_rollouts_per_hour": est(None if f is None else 1000 * f, 100),
        }
        for name, f in freed.items()
    }


def passes() -> dict:
    return {"ok": True, "failures": [], "unknown_reason": None, "pair_flip_rate": 0.0, "spearman": 1.0}


def fails(why: str) -> dict:
    return {"ok": False, "failures": [why], "unknown_reason": None, "pair_flip_rate": 0.116, "spearman": 0.937}


def unknown(why: str) -> dict:
    return {"ok": None, "failures": [], "unknown_reason": why}


def block(**verdicts: dict) -> dict:
    return {"checked": True, "source": "measured", "rules": RULES, "runtimes": verdicts}


def test_only_passing_runtimes_are_ranked_and_failing_ones_say_what_they_would_free() -> None:
    figs = figures(eager=0.0, ort=0.3, native=0.25, int8=1.0)
    verdicts = block(
        eager=passes(), ort=passes(), native=passes(), int8=fails("pair flips 11.6% > 2.0%")
    )  # int8 frees the most, but fails
    r = rank_runtimes(figs, verdicts, "eager")
    assert [(e["runtime"], e["rank"]) for e in r["passing"]] == [("ort", 1), ("native", 2)]
    assert r["best"] == "ort"
    assert [(e["runtime"], e["freed_core_s"]["mean"], e["why"]) for e in r["failing"]] == [
        ("int8", 1.0, "pair flips 11.6% > 2.0%")
    ]
    assert r["baseline"] == {"runtime": "eager", "ok": True, "why": None}
    text = " ".join(ranking_sentences(r))
    assert "1. ort 0.30 (95% CI 0.20 to 0.40); 2. native 0.25 (95% CI 0.15 to 0.35)" in text
    assert "Fastest that keeps the reward signal: **ort**" in text
    assert "**int8** fails fidelity (pair flips 11.6% > 2.0%): it would have freed 1.00 (95% CI 0.90 to 1.10)" in text
    assert "+1000 (95% CI +900 to +1100) rollouts per hour" in text


def test_ties_share_a_rank_listed_by_name_and_a_runtime_without_figures_comes_last() -> None:
    figs = figures(eager=0.0, zeta=0.5, alpha=0.5, mid=0.2, late=None)
    r = rank_runtimes(figs, block(eager=passes(), zeta=passes(), alpha=passes(), mid=passes(), late=passes()), "eager")
    assert [(e["runtime"], e["rank"]) for e in r["passing"]] == [
        ("alpha", 1),
        ("zeta", 1),
        ("mid", 3),
        ("late", None),
    ]
    assert r["best"] == "alpha"


def test_all_failing_ranks_nothing_and_says_so() -> None:
    figs = figures(eager=0.0, a=0.4, b=0.9)
    r = rank_runtimes(figs, block(eager=passes(), a=fails("Spearman 0.9 < 0.99"), b=fails("pair flips 5.0% > 2.0%")),
                      "eager")  # fmt: skip
    assert r["passing"] == [] and r["best"] is None
    assert [e["runtime"] for e in r["failing"]] == ["b", "a"]  # most freed first
    text = " ".join(ranking_sentences(r))
    rules = "reduced precision: within-group pair flips <= 2.0% and Spearman >= 0.99; fp32: max |diff| <= 0.0001"
    assert f"No compared runtime passes fidelity ({rules}; against fp32 eager" in text
    assert "Fastest" not in text


def test_a_failing_baseline_is_called_out() -> None:
    figs = figures(int8=0.0, ort=-0.5)
    r = rank_runtimes(figs, block(int8=fails("pair flips 11.6% > 2.0%"), ort=passes()), "int8")
    assert r["baseline"]["ok"] is False and r["baseline"]["why"] == "pair flips 11.6% > 2.0%"
    # ort passes, but uses more cores than the baseline: ranked, yet not "best".
    assert [e["runtime"] for e in r["passing"]] == ["ort"] and r["best"] is None
    text = " ".join(ranking_sentences(r))
    assert "The baseline int8 itself fails fidelity (pair flips 11.6% > 2.0%)" in text
    assert "No runtime that passes fidelity frees capacity against int8" in text


def test_unknown_fidelity_is_neither_ranked_nor_failed() -> None:
    figs = figures(eager=0.0, http=0.2)
    r = rank_runtimes(figs, block(eager=passes(), http=unknown("an external reward server")), "eager")
    assert r["passing"] == [] and r["failing"] == []
    assert r["unknown"][0]["runtime"] == "http" and r["unknown"][0]["why"] == "an external reward server"
    assert "http's fidelity is unknown (an external reward server), so it is not ranked." in ranking_sentences(r)


def test_no_ranking_when_fidelity_was_not_checked() -> None:
    assert rank_runtimes(figures(eager=0.0, a=1.0), {"checked": False}, "eager") is None
    assert ranking_sentences(None) == []


@pytest.fixture()
def results() -> dict:
    config = ContentionConfig(contention=ContentionSettings(runtimes=["eager", "fast"], baseline="eager", repeats=3))
    fidelity = {**block(eager=passes(), fast=fails("pair flips 11.6% > 2.0%")), "corpus": {"texts": 8, "digest": "ab"}}
    return build_results(rows(), config, POOL_CORES, complete=True, repeats_done=3, fidelity=fidelity)


def test_results_record_each_runtimes_fidelity_and_the_ranking(results: dict) -> None:
    assert results["runtimes"]["fast"]["fidelity"]["ok"] is False
    assert results["runtimes"]["eager"]["fidelity"]["ok"] is True
    assert results["ranking"]["failing"][0]["runtime"] == "fast" and results["ranking"]["best"] is None
    # fast frees 2.1 core-s per step (the recorded rows' known answer), but fails fidelity.
    assert any(c.startswith("**fast** fails fidelity") and "would have freed 2.10" in c for c in results["conclusions"])
    md = render_markdown(results, [])
    assert "## Reward fidelity" in md
    assert "| fast | **no** | 11.6% | 0.9370 | - | 2.10 (95% CI" in md and "| fails: pair flips 11.6% > 2.0% |" in md
    assert "| eager | yes | 0.0% | 1.0000 | - | 0.00 (95% CI 0.00 to 0.00) | baseline |" in md


def test_report_says_when_fidelity_was_not_checked() -> None:
    words = "not checked (contention.fidelity.check: false)"
    lines = fidelity_section({"fidelity": {"checked": False, "words": words}})
    assert "Fidelity not checked (contention.fidelity.check: false)." in lines


def test_when_no_fidelity_is_known_nothing_is_called_failing() -> None:
    figs = figures(big=0.0, small=1.5)  # two judges (rewards that are no model): fidelity does not apply
    why = "genrm is a reward that is no model (kind judge): nothing to compare with a reward model"
    r = rank_runtimes(figs, block(big=unknown(why), small=unknown(why)), "big")
    text = " ".join(ranking_sentences(r))
    assert "No compared runtime has a fidelity result" in text and "passes fidelity" not in text
    assert f"small's fidelity is unknown ({why})" in text
