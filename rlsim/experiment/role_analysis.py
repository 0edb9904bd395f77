"""The PPO step's roles in the together condition: core-seconds per role per step, and where the
capacity a faster scorer frees went.

Each role runs in a process of its own, so process accounting gives its core-seconds per together
step (``together.pool.<group>``: rollout = ``generate``, scorer = ``score``, reference, critic,
trainer = ``update``). Against the baseline, in the same repeat, the pool's identity (processes +
idle + kernel = pool cores x step time) splits the freed scoring core-seconds ``F`` into where they
went (up to the identity's residual, reported per step in ``accounting``)::

    F = sum over roles of (this runtime's core-s - the baseline's)      (a role that did more work)
        + (idle core-s, this runtime - the baseline)                    (cores left idle)
        + pool cores x (baseline step time - this runtime's)            (a shorter step)
        + (orchestration, other processes and kernel, this runtime - the baseline)   (the rest)

Every destination is a paired difference (per-repeat differences, t-interval; ``analysis``'s
statistics). The words name the largest whose interval lies above 0, but only once ``F`` itself is
established (its interval above 0) from at least ``MIN_REPEATS_TO_NAME`` repeats: two equal
per-repeat differences give a zero-width interval that would name a destination by chance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlsim.experiment.analysis import PAIRED_DIFF, estimate, paired_compare
from rlsim.experiment.capacity import EXPERIENCE_BARS, Samples, paired, values
from rlsim.experiment.formatting import ReportSection, fmt_est
from rlsim.experiment.stopping import MIN_REPEATS_FOR_TARGET

MIN_REPEATS_TO_NAME = MIN_REPEATS_FOR_TARGET  # the same reason: two repeats give too rough an sd

# role -> its accounting group (a bar of capacity.BAR_GROUPS)
ROLE_GROUPS = {
    "rollout": "generate",
    "scorer": "score",
    "reference": "reference",
    "critic": "critic",
    "trainer": "update",
}
# Where freed scoring capacity can go, in the order the words list them.
DESTINATIONS = ("rollout", "reference", "critic", "trainer", "idle", "shorter_step", "rest")
DESTINATION_WORDS = {
    "rollout": "generation",
    "reference": "the reference",
    "critic": "the critic",
    "trainer": "the trainer",
    "idle": "idle cores",
    "shorter_step": "a shorter step",
    "rest": "orchestration, other processes and the kernel",
}
REST_BARS = ("orchestration", "other processes", "kernel")

Per = Mapping[str, Mapping[str, Samples]]


def has_roles(per: Per, runtime: str) -> bool:
    """Did ``runtime``'s together steps run the reference or the critic (PPO, or a KL)?"""
    return any(f"together.pool.{bar}" in per.get(runtime, {}) for bar in EXPERIENCE_BARS)


def _series(destination: str) -> list[str]:
    """The per-repeat series whose sum is that destination's core-s (or step time) per step."""
    if destination == "idle":
        return ["together.pool.idle"]
    if destination == "shorter_step":
        return ["together.step_s"]
    if destination == "rest":
        return [f"together.pool.{bar}" for bar in REST_BARS]
    return [f"together.pool.{ROLE_GROUPS[destination]}"]


def destination_pairs(per: Per, runtime: str, baseline: str, pool_cores: int) -> dict[str, list[float]]:
    """Per destination, per repeat: the core-seconds per step it took of the freed capacity (positive:
    took some), paired with the baseline in the same repeat; destinations never measured are left out."""
    out = {}
    for dest in DESTINATIONS:
        diffs: list[float] = []
        for key in _series(dest):
            mine, base = paired(per, (runtime, key), (baseline, key))
            part = [m - b for m, b in zip(mine, base, strict=True)]
            diffs = part if not diffs else [d + p for d, p in zip(diffs, part, strict=True)]
        if diffs:
            out[dest] = [-pool_cores * d for d in diffs] if dest == "shorter_step" else diffs
    return out


def role_figures(per: Per, runtime: str, baseline: str, pool_cores: int) -> dict[str, Any]:
    """``results.json``'s ``runtimes.<name>.roles``: ``core_s_per_step`` per role; against the baseline
    (not for the baseline itself) ``freed_went_to`` per destination (core-s per step, paired),
    ``significance`` of each role's change (``analysis.paired_compare``) and ``words``."""
    core_s = {
        role: estimate(values(per, runtime, f"together.pool.{group}"))
        for role, group in ROLE_GROUPS.items()
        if f"together.pool.{group}" in per.get(runtime, {})
    }
    out: dict[str, Any] = {"core_s_per_step": core_s}
    if runtime == baseline:
        return out
    pairs = destination_pairs(per, runtime, baseline, pool_cores)
    went = {d: {**estimate(v), "method": PAIRED_DIFF} for d, v in pairs.items()}
    out["freed_went_to"] = went
    out["significance"] = {
        role: paired_compare(*paired(per, (runtime, f"together.pool.{group}"), (baseline, f"together.pool.{group}")))
        for role, group in ROLE_GROUPS.items()
        if role in core_s
    }
    score = "together.pool.score"
    base, mine = paired(per, (baseline, score), (runtime, score))
    out["freed_core_s"] = {**estimate([b - m for b, m in zip(base, mine, strict=True)]), "method": PAIRED_DIFF}
    out["destination"] = main_destination(went, out["freed_core_s"])
    return out


def _above_zero(e: Mapping[str, Any]) -> bool:
    return e.get("ci_low") is not None and e["ci_low"] > 0


def main_destination(went: Mapping[str, Mapping[str, Any]], freed: Mapping[str, Any]) -> str | None:
    """The destination with the largest mean among those whose 95% CI lies above 0; None if none does,
    if the freed core-s are not established (CI above 0) or come from fewer than ``MIN_REPEATS_TO_NAME``."""
    if freed.get("n", 0) < MIN_REPEATS_TO_NAME or not _above_zero(freed):
        return None
    above = [(e["mean"], d) for d, e in went.items() if _above_zero(e)]
    return max(above)[1] if above else None


def _verdict(roles: Mapping[str, Any]) -> str:
    dest, freed = roles["destination"], roles["freed_core_s"]
    if dest:
        return f"Most went to {DESTINATION_WORDS[dest]} (its paired 95% CI lies above 0)."
    if freed.get("n", 0) < MIN_REPEATS_TO_NAME:
        return f"No destination is named from {freed.get('n', 0)} repeats (at least {MIN_REPEATS_TO_NAME} are needed)."
    if not _above_zero(freed):
        return "The freed core-s are not established (their paired 95% CI reaches 0), so no destination is named."
    return "No destination took a share whose paired 95% CI lies above 0."


def role_words(name: str, figures: Mapping[str, Any], baseline: str) -> str:
    """One sentence: the freed scoring core-s of ``name`` vs ``baseline`` and where they went."""
    roles = figures["roles"]
    freed = roles["freed_core_s"]
    went = roles["freed_went_to"]
    parts = [f"{DESTINATION_WORDS[d]} {fmt_est(went[d], '+.2f')}" for d in DESTINATIONS if d in went]
    verdict = _verdict(roles)
    return (
        f"PPO roles, **{name}** vs {baseline}: scoring frees {fmt_est(freed, '.2f')} core-s per step; per step, "
        + "; ".join(parts)
        + f" core-s. {verdict}"
    )


def role_table(results: Mapping[str, Any]) -> list[str]:
    """The report's table: core-seconds per role per together step, per runtime (mean, 95% CI)."""
    runtimes = {n: f for n, f in results["runtimes"].items() if "roles" in f}
    if not runtimes:
        return []
    roles = [r for r in ROLE_GROUPS if any(r in f["roles"]["core_s_per_step"] for f in runtimes.values())]
    lines = [
        "## PPO roles: core-seconds per together step",
        "",
        "Each role on its own process (process accounting), mean over repeats with a 95% CI. Where the capacity "
        "freed by a runtime went, against the baseline in the same repeat (core-s per step; positive: that "
        "destination took some; 'a shorter step' is pool cores x the step time saved):",
        "",
        "| runtime | " + " | ".join(roles) + " |",
        "|---" * (len(roles) + 1) + "|",
    ]
    for name, f in runtimes.items():
        cells = [fmt_est(f["roles"]["core_s_per_step"].get(r), ".2f") for r in roles]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    moved = {n: f["roles"]["freed_went_to"] for n, f in runtimes.items() if "freed_went_to" in f["roles"]}
    if moved:
        dests = [d for d in DESTINATIONS if any(d in w for w in moved.values())]
        lines += ["", "| runtime | " + " | ".join(DESTINATION_WORDS[d] for d in dests) + " |"]
        lines.append("|---" * (len(dests) + 1) + "|")
        for name, w in moved.items():
            lines.append(f"| {name} | " + " | ".join(fmt_est(w.get(d), "+.2f") for d in dests) + " |")
    return lines + [""]


# The PPO step's section (the reference and the critic as roles): what the step-by-step schedules' entries in
# rlsim.schedule_kinds name as their ``reports``.
ROLES_REPORT = ReportSection(
    key="roles",
    units="core_s_per_step: core-seconds of each role's process per together step; freed_went_to: per "
    "destination, this runtime minus the baseline in the same repeat (core-s per step; shorter_step = pool cores "
    "x the step time saved); destination: the largest whose 95% CI lies above 0",
    glossary=(
        ("core-s per role", "CPU seconds of that role's actor process and its children per together step"),
        (
            "where the freed capacity went",
            "per destination, this runtime's core-s per step minus the baseline's in the same repeat; the "
            "freed scoring core-s equal their sum (roles + idle + shorter step + the rest) up to the residual",
        ),
    ),
    present=has_roles,
    figures=role_figures,
    words=role_words,
    table=role_table,
)
