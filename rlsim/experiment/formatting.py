"""How the experiment writes an estimate: a leaf module every report section formats with.

An estimate is a ``results.json`` mapping with ``mean``, ``ci_low``, ``ci_high`` and ``n``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Per = Mapping[str, Mapping[str, Any]]  # runtime -> series name -> samples (rlsim.experiment.capacity.Samples)


@dataclass(frozen=True)
class ReportSection:
    """What a schedule adds to the contention results and report (``ScheduleKind.reports`` names each).

    ``key``: its entry under ``results.json``'s ``runtimes.<name>``; ``present(per, runtime)``: whether the
    runtime's measurements have what it reads (recorded rows are re-analysed the same way); ``figures(per,
    runtime, baseline, pool_cores)``; ``words(name, runtime_figures, baseline)``: one conclusion sentence, or
    "" for none; ``table(results)``: the report's section lines; ``units`` and ``glossary``: what its figures
    mean."""

    key: str
    units: str
    glossary: tuple[tuple[str, str], ...]
    present: Callable[[Per, str], bool]
    figures: Callable[[Per, str, str, int], dict[str, Any]]
    words: Callable[[str, Mapping[str, Any], str], str]
    table: Callable[[Mapping[str, Any]], list[str]]


def num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def fmt_est(e: Mapping[str, Any] | None, fmt: str = ".3g", unit: str = "") -> str:
    """``1.23 (95% CI 1.10 to 1.36)`` or ``1.23`` when there is no CI."""
    if not e or e.get("mean") is None:
        return "n/a"
    text = format(e["mean"], fmt) + unit
    if e.get("ci_low") is None or e.get("ci_high") is None:
        return text + (" (CI unbounded)" if e.get("n", 0) >= 2 else "")
    return f"{text} (95% CI {format(e['ci_low'], fmt)} to {format(e['ci_high'], fmt)}{unit})"


def plus_minus(e: Mapping[str, Any], fmt: str, unit: str = "") -> str:
    """``0.90 +/- 0.10`` (half-width of the 95 % CI) for symmetric t-intervals."""
    if e.get("mean") is None:
        return "n/a"
    if e.get("ci_low") is None or e.get("ci_high") is None:
        return format(e["mean"], fmt) + unit
    half = format((e["ci_high"] - e["ci_low"]) / 2, fmt.replace("+", ""))
    return f"{format(e['mean'], fmt)} +/- {half}{unit}"


def excludes_zero(e: Mapping[str, Any]) -> bool | None:
    if e.get("ci_low") is None or e.get("ci_high") is None:
        return None
    return e["ci_low"] > 0 or e["ci_high"] < 0
