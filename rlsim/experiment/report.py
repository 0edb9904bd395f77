"""report.md of the contention experiment, with the conclusions written from the measured figures.

Every sentence is built from results.json values (mean and 95 % CI from the repeats) and the
significance verdicts of ``analysis.compare``; nothing here is a fixed claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlsim.experiment.fidelity_rank import fidelity_section
from rlsim.experiment.formatting import excludes_zero, fmt_est, num, plus_minus
from rlsim.experiment.schedule_report import schedule_conclusions, schedule_sections

GLOSSARY = [
    ("step time", "wall time of a together step: overlapped generate + score, then update and weight sync"),
    (
        "scoring on the critical path",
        "time scoring runs while generation does not (the update waits for it), as a share of step time",
    ),
    ("scoring core-s", "CPU seconds of the scoring actors and their children per together step (process accounting)"),
    ("gen slowdown", "generation tokens/s alone / together - 1, a fraction: 0.25 = 25% slower beside scoring"),
    ("score slowdown", "scoring rollouts per busy second alone / together - 1, a fraction"),
    ("freed core-s", "baseline scoring core-s - this runtime's, paired within a repeat"),
    ("extra rollouts per step", "freed core-s / generation core-s per rollout measured alone"),
    ("time-boxed rollouts per hour", "rollouts generated and scored within the budget, per hour of budget"),
    (
        "step time change (paired)",
        "geometric mean over repeats of this runtime's step time / the baseline's in the "
        "same repeat, minus 1; the unpaired ratio of means is step_time_change_unpaired in results.json",
    ),
    (
        "half-width reached",
        "half the width of the freed core-s 95% CI, as a share of its mean; the target "
        "(contention.target_ci) is floored at 5% of the baseline's scoring core-s",
    ),
]


def _runtime_sentence(name: str, f: Mapping[str, Any], baseline: str) -> str:
    freed, sig = f["freed_core_s"], f["significance"]
    zero = excludes_zero(freed)
    freed_words = (
        "significant: its paired 95% CI excludes 0"
        if zero
        else "not significant: its paired 95% CI includes 0"
        if zero is False
        else "no CI"
    )
    share = f["freed_pool_share"]["mean"]
    parts = [
        f"**{name}** frees {plus_minus(freed, '.2f')} core-s per step"
        f"{f' ({share:.0%} of the pool)' if share is not None else ''} vs {baseline} ({freed_words}); "
        f"step time changes {fmt_est(f['step_time_change'], '+.1%')}, {sig['step_time_s']['words']}.",
        f"Generation together runs {plus_minus(f['extra_gen_tokens_per_s'], '+.0f')} tokens/s vs {baseline} "
        f"({sig['gen_tokens_per_s_together']['words']}); the freed core-s are worth "
        f"{plus_minus(f['extra_rollouts_per_step'], '+.1f')} rollouts per step at the measured generation cost.",
    ]
    if f["timeboxed_rollouts_per_hour"]["n"]:  # not run under schedule async
        parts.append(
            f"Time-boxed: {plus_minus(f['extra_rollouts_per_hour'], '+.0f')} rollouts per hour vs {baseline} "
            f"({sig['timeboxed_rollouts_per_hour']['words']})."
        )
    return " ".join(parts)


def conclusions(results: Mapping[str, Any]) -> list[str]:
    """The report's conclusions, one string per finding, from the figures in ``results``."""
    runtimes, baseline = results.get("runtimes", {}), results.get("baseline")
    if not runtimes:
        return ["no repeat finished yet"]
    out = []
    stop = results.get("stopping", {})
    if stop.get("reason"):
        out.append(f"Stopped after {results.get('repeats_done')} repeats: {stop['words']}.")
    floor = _sign_flip_floor(results)
    if floor is not None and floor >= 0.05:
        out.append(
            f"Significance below is the paired t test on per-repeat log-ratios; the exact sign-flip test "
            f"beside it cannot go below p = {floor:.2g} with {results.get('repeats_done')} repeats, so it "
            "only confirms a difference from 6 repeats on."
        )
    for name, f in runtimes.items():
        gs, ss = f["gen_slowdown"], f["score_slowdown"]
        out.append(
            f"Beside {name} scoring, generation slows by {fmt_est(gs, '+.0%')} against generation alone "
            f"({f['significance']['gen_slowdown']['words']}); {name} scoring slows by {fmt_est(ss, '+.0%')} against "
            f"scoring alone ({f['significance']['score_slowdown']['words']}). Scoring sits on the critical path for "
            f"{fmt_est(f['scoring_critical_share'], '.0%')} of the step and costs "
            f"{plus_minus(f['scoring_core_s'], '.2f')} core-s per step."
        )
    for name, f in runtimes.items():
        if baseline is not None and name != baseline and baseline in runtimes:
            out.append(_runtime_sentence(name, f, baseline))
    out += schedule_conclusions(results)
    for name, reason in results.get("skipped_runtimes", {}).items():
        out.append(f"{name} was not measured: {reason}.")
    best = _most_freed(runtimes, baseline)
    if best:
        out.append(best)
    acc = results.get("accounting", {})
    if acc.get("checked"):
        held = f"{acc['within_5pct']} of {acc['checked']}"
        other = acc.get("other_processes_pool_share")
        out.append(
            f"Accounting identity (processes + idle + kernel = pool cores x time) held within 5% in {held} measured "
            f"steps (largest miss {acc['max_abs_residual_fraction']:.1%}); processes outside the experiment used "
            f"{num(other, '.0%')} of the pool on average"
            + (", so the figures carry that background load." if other and other > 0.05 else ".")
        )
        short = [
            f"{cond} ({c['within_5pct']} of {c['checked']}, largest miss {c['max_abs_residual_fraction']:.1%}, "
            f"{c['mean_seconds']:.2f} s long on average)"
            for cond, c in acc.get("by_condition", {}).items()
            if c["within_5pct"] < c["checked"]
        ]
        if short:
            out.append(
                "The misses are all in " + "; ".join(short) + ": CPU time is counted in 10 ms ticks per "
                "process, so over a condition this short a dozen processes' rounding is several percent "
                "of the pool time. Every other condition held within 5%."
            )
    return out


def _sign_flip_floor(results: Mapping[str, Any]) -> float | None:
    for f in results.get("runtimes", {}).values():
        floor = f["significance"]["gen_slowdown"].get("smallest_sign_flip_p")
        if floor is not None:
            return float(floor)
    return None


def _most_freed(runtimes: Mapping[str, Any], baseline: str | None) -> str | None:
    cands = [
        (f["freed_core_s"]["mean"], n)
        for n, f in runtimes.items()
        if n != baseline and f["freed_core_s"]["mean"] is not None
    ]
    if not cands:
        return None
    value, name = max(cands)
    f = runtimes[name]
    return (
        f"Most capacity freed: {name}, {value:.2f} core-s per step, while its step time moved "
        f"{fmt_est(f['step_time_change'], '+.1%')}: the gain shows as pool capacity, not as step time."
        if value > 0
        else f"No runtime used fewer scoring core-s than {baseline}."
    )


def _table(results: Mapping[str, Any]) -> list[str]:
    cols = [
        ("step time s", "step_time_s", ".2f"),
        ("scoring critical share", "scoring_critical_share", ".0%"),
        ("scoring core-s", "scoring_core_s", ".2f"),
        ("freed core-s", "freed_core_s", ".2f"),
        ("freed share of pool", "freed_pool_share", ".0%"),
        ("gen tok/s alone", "gen_tokens_per_s_alone", ".0f"),
        ("gen tok/s together", "gen_tokens_per_s_together", ".0f"),
        ("gen slowdown", "gen_slowdown", "+.0%"),
        ("score slowdown", "score_slowdown", "+.0%"),
        ("time-boxed rollouts/h", "timeboxed_rollouts_per_hour", ".0f"),
        ("extra rollouts/h", "extra_rollouts_per_hour", "+.0f"),
    ]
    lines = ["| runtime | " + " | ".join(c[0] for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, f in results["runtimes"].items():
        lines.append(f"| {name} | " + " | ".join(fmt_est(f[key], fmt) for _, key, fmt in cols) + " |")
    return lines


def _pool_table(results: Mapping[str, Any]) -> list[str]:
    runtimes = results["runtimes"]
    bars = list(next(iter(runtimes.values()))["pool_core_s_per_step"])
    lines = ["| runtime | " + " | ".join(bars) + " |", "|---" * (len(bars) + 1) + "|"]
    for name, f in runtimes.items():
        lines.append(f"| {name} | " + " | ".join(plus_minus(f["pool_core_s_per_step"][b], ".2f") for b in bars) + " |")
    return lines


def _accounting_rows(results: Mapping[str, Any]) -> list[str]:
    lines = [
        "| repeat | runtime | condition | step | pool core-s | accounted | residual | within 5% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results.get("measurements", []):
        p = r["pool"]
        ok = "yes" if p["within_5pct"] else "NO"
        lines.append(
            f"| {r['repeat']} | {r['runtime']} | {r['condition']} | {r['step']} | {p['pool_core_s']:.2f} | "
            f"{p['accounted_core_s']:.2f} | {p['residual_fraction']:+.1%} | {ok} |"
        )
    return lines


BUDGETS = {"repeats": "the fixed number of repeats", "minutes": "max_minutes"}


def precision_words(name: str, p: Mapping[str, Any], reason: str | None = None) -> str:
    """One runtime's freed-capacity precision and, against the target, how it stopped and what is left."""
    frac = p.get("half_width_fraction")
    text = (
        f"{name}: freed core-s CI half-width {num(p.get('half_width'), '.3f')} core-s = "
        f"{'n/a' if frac is None else format(frac, '.0%')} of the mean after {p['n']} repeats"
    )
    if p.get("target_ci") is None:
        return text + " (no target set: contention.target_ci)"
    target = (
        f"; target {p['target_ci']:.0%} (half-width <= {p['target_half_width']:.3f} core-s, "
        "floored at 5% of the baseline's scoring cost)"
    )
    if p.get("met"):
        return text + target + (": met" + (", stopped by the target" if p.get("stopped_by") == "target" else ""))
    how = (
        f"stopped by the budget ({BUDGETS.get(reason or '', 'repeats or minutes')})"
        if p.get("stopped_by") == "budget"
        else "not met yet"
    )
    more = p["further_repeats"]
    return (
        text + target + f": {how}; about {more} more repeat{'' if more == 1 else 's'} would reach it "
        f"({p['repeats_needed']} in all, projected from the current spread)"
    )


def _quality(results: Mapping[str, Any]) -> list[str]:
    """Precision reached per runtime against contention.target_ci, and the idle waits."""
    reason = results.get("stopping", {}).get("reason")
    lines = [
        f"- {precision_words(name, f['precision'], reason)}"
        for name, f in results["runtimes"].items()
        if name != results.get("baseline") and f.get("precision")
    ]
    settle = results.get("accounting", {}).get("settle")
    if settle:
        lines.append(
            f"- before each condition the actors were let go idle: {settle['mean_s']:.2f} s on average "
            f"(max {settle['max_s']:.2f} s); {settle['not_settled']} of {settle['conditions']} conditions "
            "started before they were idle (the wait has a cap: contention.settle_max_s)"
        )
    return lines


def _planned(results: Mapping[str, Any]) -> str:
    stop = results.get("stopping", {})
    if results.get("repeats"):
        return f"of {results['repeats']}"
    return f"(until the {stop.get('target_ci', 0):.0%} target or {num(stop.get('max_minutes'), '.0f')} minutes)"


def render_markdown(results: Mapping[str, Any], figures: list[str]) -> str:
    cfg = results.get("config", {})
    w = cfg.get("loop", {}).get("workload", {})
    head = [
        "# Contention and freed capacity",
        "",
        f"Runtimes {', '.join(results.get('runtime_order', []))} against baseline **{results.get('baseline')}** on one "
        f"shared pool of {results.get('pool_cores')} cores; {results.get('repeats_done', 0)} "
        f"{_planned(results)} repeats done (each a fresh Ray session unless configured otherwise), "
        f"{results.get('steps_per_condition')} step(s) per condition (the together step run "
        f"{results.get('together_trials', 1)} time(s) each), {w.get('prompts_per_step')} prompts x "
        f"{w.get('group_size')} samples per step, time box {results.get('timebox_budget_s')} s. "
        f"{'Complete' if results.get('complete') else 'INCOMPLETE (interrupted or still running)'}; "
        f"{results.get('elapsed_s', 0):.0f} s.",
        "",
        "All figures: mean over repeats with a 95% CI (Student t). Comparisons with the baseline are paired within "
        "a repeat (per-repeat differences, or log-ratios for changes; paired t test); the unpaired forms (Fieller "
        "ratio, Mann-Whitney) are in results.json as `*_unpaired`. Slowdowns are fractions.",
        "",
    ]
    if not results.get("runtimes"):
        return "\n".join(head + ["No measurement finished yet."]) + "\n"
    body = ["## Conclusions", ""] + [f"- {c}" for c in results.get("conclusions", [])] + [""]

    body += fidelity_section(results)
    body += ["## Figures", ""] + [f"![{f}]({f})" for f in figures] + [""]
    body += ["## Per runtime", ""] + _table(results) + [""]
    body += ["## Measurement quality", ""] + _quality(results) + [""]
    body += ["## Pool core-seconds per together step, by activity (+/- 95% CI half-width)", ""] + _pool_table(results)
    body += [
        "",
        "## Accounting identity per measured step",
        "",
        "processes (each activity, orchestration, other processes) + idle + kernel vs pool cores x time.",
        "",
    ]
    body += _accounting_rows(results)
    body += [""] + schedule_sections(results)
    body += ["## Glossary", ""] + [f"- **{k}**: {v}" for k, v in GLOSSARY]
    return "\n".join(head + body) + "\n"
