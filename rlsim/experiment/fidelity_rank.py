"""Rank the compared runtimes by the capacity they free, among those whose rewards keep fp32's training signal.

A faster scorer frees cores for generation (``freed_core_s`` against the baseline), but a quantized one may also
change which sample of a group the reward model prefers, and in GRPO/PPO that changes the training signal. So
only runtimes that pass the fidelity rules (``rlsim.corpus.agreement.FidelityRules``: within-group pair flips and
Spearman against fp32 eager on the fidelity corpus) are ranked; each one that fails is listed with the rule it
breaks and what it would have freed; a runtime whose fidelity is unknown (hardware lacking, an external reward
server) is listed apart, neither ranked nor condemned. Runtimes with equal mean freed core-s share a rank and are
listed by name; a runtime without a freed figure yet (no repeat finished) comes last, unranked.

Pure functions of results.json's ``runtimes`` figures and ``fidelity`` block (``fidelity_source``), so recorded
results can be re-ranked and the logic is tested without running anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlsim.experiment.formatting import fmt_est

FIGURES = ("freed_core_s", "freed_pool_share", "extra_rollouts_per_hour")


def rank_runtimes(
    figures: Mapping[str, Mapping[str, Any]], fidelity: Mapping[str, Any] | None, baseline: str
) -> dict[str, Any] | None:
    """results.json's ``ranking``: ``passing`` (ranked), ``failing`` (with ``why``), ``unknown`` (with ``why``),
    ``best`` (the top passing runtime if it frees capacity, else None) and the baseline's own verdict.
    None when fidelity was not checked."""
    if not fidelity or not fidelity.get("checked"):
        return None
    verdicts = fidelity.get("runtimes", {})
    passing, failing, unknown = [], [], []
    for name, f in figures.items():
        if name == baseline:
            continue
        entry = {"runtime": name, **{key: f.get(key) for key in FIGURES}}
        verdict = verdicts.get(name, {})
        if verdict.get("ok") is None:
            unknown.append({**entry, "why": verdict.get("unknown_reason") or "no fidelity result"})
        elif verdict["ok"]:
            passing.append(entry)
        else:
            failing.append({**entry, "why": "; ".join(verdict.get("failures", []))})
    _assign_ranks(passing)
    failing.sort(key=_order)
    top = passing[0] if passing else None
    best = top["runtime"] if top and (_freed(top) or 0.0) > 0 else None
    base = verdicts.get(baseline, {})
    return {
        "by": "freed_core_s mean, among runtimes that pass fidelity",
        "rules": fidelity.get("rules"),
        "baseline": {
            "runtime": baseline,
            "ok": base.get("ok"),
            "why": "; ".join(base.get("failures", [])) or base.get("unknown_reason"),
        },
        "passing": passing,
        "failing": failing,
        "unknown": unknown,
        "best": best,
    }


def _freed(entry: Mapping[str, Any]) -> float | None:
    e = entry.get("freed_core_s") or {}
    return e.get("mean")


def _order(entry: Mapping[str, Any]) -> tuple[bool, float, str]:
    """Most freed first, ties by name, no figure last."""
    freed = _freed(entry)
    return (freed is None, -(freed or 0.0), entry["runtime"])


def _assign_ranks(entries: list[dict[str, Any]]) -> None:
    """Sort in place and number them 1, 2, 2, 4 ... (equal means share a rank); ``rank`` None without a figure."""
    entries.sort(key=_order)
    for i, entry in enumerate(entries):
        freed = _freed(entry)
        if freed is None:
            entry["rank"] = None
        elif i > 0 and _freed(entries[i - 1]) == freed:
            entry["rank"] = entries[i - 1]["rank"]
        else:
            entry["rank"] = i + 1


def _rules_words(rules: Mapping[str, Any] | None) -> str:
    if not rules:
        return "the fidelity rules"
    return (
        f"reduced precision: within-group pair flips <= {rules['max_pair_flip_rate']:.1%} and Spearman >= "
        f"{rules['min_spearman']:g}; fp32: max |diff| <= {rules['fp32_max_abs_diff']:g}; against fp32 eager on the "
        "fidelity corpus"
    )


def ranking_sentences(ranking: Mapping[str, Any] | None) -> list[str]:
    """The report's conclusions about the ranking, one string per finding."""
    if ranking is None:
        return []
    baseline = ranking["baseline"]["runtime"]
    out = []
    if ranking["baseline"]["ok"] is False:
        out.append(
            f"The baseline {baseline} itself fails fidelity ({ranking['baseline']['why']}): every freed figure is "
            "measured against rewards that already differ from fp32 eager's."
        )
    elif ranking["baseline"]["ok"] is None:
        out.append(f"The baseline {baseline}'s fidelity is unknown ({ranking['baseline']['why'] or 'no result'}).")
    rules = _rules_words(ranking.get("rules"))
    if ranking["passing"]:
        ranked = "; ".join(
            f"{e['rank'] or '-'}. {e['runtime']} {fmt_est(e['freed_core_s'], '.2f')}" for e in ranking["passing"]
        )
        out.append(
            f"Ranked by freed core-s per step vs {baseline}, among runtimes that pass fidelity ({rules}): {ranked}."
        )
    elif ranking["failing"]:
        out.append(f"No compared runtime passes fidelity ({rules}), so none is ranked.")
    else:  # every fidelity unknown: rewards that are no model, an external server, hardware lacking
        out.append("No compared runtime has a fidelity result (each says why below), so none is ranked: the freed "
                   "capacity above stands on its own.")  # fmt: skip
    if ranking["best"]:
        best = ranking["passing"][0]
        out.append(
            f"Fastest that keeps the reward signal: **{ranking['best']}**, freeing "
            f"{fmt_est(best['freed_core_s'], '.2f')} core-s per step "
            f"({fmt_est(best['extra_rollouts_per_hour'], '+.0f')} rollouts per hour)."
        )
    elif ranking["passing"]:
        out.append(f"No runtime that passes fidelity frees capacity against {baseline} (mean freed core-s <= 0).")
    for e in ranking["failing"]:
        out.append(
            f"**{e['runtime']}** fails fidelity ({e['why']}): it would have freed {fmt_est(e['freed_core_s'], '.2f')} "
            f"core-s per step ({fmt_est(e['extra_rollouts_per_hour'], '+.0f')} rollouts per hour), bought with a "
            "different training signal."
        )
    for e in ranking["unknown"]:
        out.append(f"{e['runtime']}'s fidelity is unknown ({e['why']}), so it is not ranked.")
    return out


def fidelity_section(results: Mapping[str, Any]) -> list[str]:
    """report.md's fidelity table: per runtime its fidelity, freed core-s and place in the ranking."""
    fidelity = results.get("fidelity") or {}
    if not fidelity.get("checked"):
        return ["## Reward fidelity", "", f"Fidelity {fidelity.get('words', 'not checked')}.", ""]
    ranking = results.get("ranking") or {}
    place = {e["runtime"]: f"rank {e['rank'] or '-'}" for e in ranking.get("passing", [])}
    place |= {e["runtime"]: f"fails: {e['why']}" for e in ranking.get("failing", [])}
    place |= {e["runtime"]: f"unknown: {e['why']}" for e in ranking.get("unknown", [])}
    source = f"read from {fidelity['file']}" if fidelity.get("source") == "file" else "measured on this machine"
    corpus = fidelity.get("corpus") or {}
    lines = [
        "## Reward fidelity",
        "",
        f"Against {fidelity.get('reference', 'fp32 eager')} on the fidelity corpus ({corpus.get('texts', '?')} texts, "
        f"digest {corpus.get('digest', '?')}), {source}; pass rules: {_rules_words(fidelity.get('rules'))}.",
        "",
        "| runtime | passes | pair flips | Spearman | adv. sign flips | freed core-s | ranking |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in fidelity.get("runtimes", {}).items():
        freed = fmt_est((results.get("runtimes", {}).get(name) or {}).get("freed_core_s"), ".2f")
        where = "baseline" if name == results.get("baseline") else place.get(name, "not measured")
        lines.append(f"| {name} | {_verdict_cells(f)} | {freed} | {where} |")
    return lines + [""]


def _verdict_cells(f: Mapping[str, Any]) -> str:
    """passes | pair flips | Spearman | advantage sign flips, ``-`` where unknown."""
    ok = {True: "yes", False: "**no**", None: "unknown"}[f.get("ok")]
    flips, signs = (
        ("-" if f.get(k) is None else f"{f[k]:.1%}") for k in ("pair_flip_rate", "advantage_sign_flip_rate")
    )
    rho = "-" if f.get("spearman") is None else f"{f['spearman']:.4f}"
    return f"{ok} | {flips} | {rho} | {signs}"


def attach_fidelity(results: dict[str, Any], fidelity: Mapping[str, Any] | None) -> None:
    """Put the fidelity block, each measured runtime's verdict and the ranking into ``results`` (in place)."""
    results["fidelity"] = dict(fidelity) if fidelity else {"checked": False, "words": "not checked"}
    for name, figures in results["runtimes"].items():
        figures["fidelity"] = results["fidelity"].get("runtimes", {}).get(name)
    results["ranking"] = rank_runtimes(results["runtimes"], results["fidelity"], results["baseline"])
