"""What the schedules add to the contention results and report: the ``ReportSection``s their ``SCHEDULES``
entries name (PPO's roles for the step-by-step schedules, rlsim.experiment.role_analysis; the async outcomes,
rlsim.experiment.asynchronous.analysis); nothing for a GRPO step.

``schedule_figures`` adds each section's figures to a runtime's where its measurements have them, so recorded
rows are re-analysed the same way; ``schedule_conclusions`` and ``schedule_sections`` are the report's
hooks (report.py calls them), each empty when no section's figures are there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlsim.experiment.capacity import Samples
from rlsim.experiment.formatting import ReportSection
from rlsim.schedule_kinds import SCHEDULES


def report_sections() -> list[ReportSection]:
    """The sections the schedules' entries name (``ScheduleKind.reports``), each once, in registry order."""
    found: dict[str, ReportSection] = {}
    for kind in SCHEDULES.values():
        for target in kind.reports:
            section: ReportSection = kind.load(target)
            found.setdefault(section.key, section)
    return list(found.values())


def schedule_figures(
    per: Mapping[str, Mapping[str, Samples]], runtime: str, baseline: str, pool_cores: int
) -> dict[str, Any]:
    """``{"roles": ...}`` for a step with the reference or critic, ``{"async": ...}`` for an async run: each
    section whose figures the runtime's measurements have."""
    return {s.key: s.figures(per, runtime, baseline, pool_cores) for s in report_sections() if s.present(per, runtime)}


def schedule_units(runtimes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The ``units`` entries of the figures present."""
    return {s.key: s.units for s in report_sections() if any(s.key in f for f in runtimes.values())}


def schedule_conclusions(results: Mapping[str, Any]) -> list[str]:
    """Per compared runtime, where its freed capacity went (PPO roles; async outcomes)."""
    runtimes, baseline = results.get("runtimes", {}), results.get("baseline")
    if not isinstance(baseline, str) or baseline not in runtimes:
        return []
    sections = report_sections()
    return [
        s.words(name, f, baseline)
        for name, f in runtimes.items()
        if name != baseline
        for s in sections
        if "freed_went_to" in f.get(s.key, {})
    ]


def schedule_sections(results: Mapping[str, Any]) -> list[str]:
    """The report's sections of the schedules' figures present, with their glossary lines."""
    sections = report_sections()
    lines = [line for s in sections for line in s.table(results)]
    present = [s for s in sections if any(s.key in f for f in results.get("runtimes", {}).values())]
    if present:
        lines += ["Terms of the sections above:", ""]
        lines += [f"- **{term}**: {text}" for s in present for term, text in s.glossary] + [""]
    return lines
