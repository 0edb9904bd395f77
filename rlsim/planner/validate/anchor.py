"""Anchored validation: read the planner's error against a host whose speed moves between hours.

A shared host drifts: identical runs, token for token the same work, moved 6-22 % between hours here
(issue 31), more than the error being measured. ``rlsim plan validate`` therefore runs one **anchor**,
a configuration of the profile's own calibration set, before, between and after the validation
configurations (A V1 A V2 ... Vn A), and predicts it like the others.

- Each anchor run gives the host's speed at that moment as ``ratio = measured / predicted`` step time.
- A configuration's **anchored error** scales its prediction by the ratio of the anchor runs just before
  and just after it, combined as their geometric mean (a linear drift in log-time, read at the midpoint):
  ``anchored = (1 + error) * ratio - 1`` for step time, ``(1 + error) / ratio - 1`` for rollouts per hour.
  That is ``(1 + m_V) / (1 + m_A) - 1`` with ``m`` the model's error at the profile's hour: the host's
  speed cancels, and the error is read relative to the model's own error on the anchor ``m_A`` (small, the
  anchor being a calibration configuration, but in every anchored error; ``anchor.model_error`` where the
  profile kept the anchor's step). Phase by phase the same is done with the
  anchor's per-phase ratios (``anchored_phase_errors``, for phases of at least 5 % of the anchor's step).
- Where the profile kept the anchor's step from its own hour (``rlsim profile`` with ``anchor:``, the same run
  config), ``profile_hour_error`` scales the prediction by the anchor's measured step now over then instead:
  the host's change since the profile alone, so ``m_V`` itself (as far as the profile's anchor run was typical).
- The **drift** is the anchor's last measured step over its first, minus 1; the **identical-run floor**
  is the |change| between consecutive anchor runs (mean with a t-interval, and median): the error an
  identical configuration would show, below which no validation error means anything.

What anchoring cannot correct: a drift that hits one phase and not another (memory bandwidth taken by a
neighbour slows decoding more than the update) scales the anchor's step by its own phase mix, so a
configuration with another mix keeps part of it. ``uneven`` names the phase that moved most when, in any
anchor run, the phases' changes since the first run spread by more than the anchored floor (at least 3 %).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from rlsim.config_loader import validate
from rlsim.errors import RlsimError
from rlsim.metrics.stats import mean_ci
from rlsim.planner.measure.loop_results import finished_at
from rlsim.planner.measure.loop_set import AnchorSpec, LoopCase, load_loop_set, resolve_cases, resolve_path
from rlsim.planner.profile.schema import CalibrationSet, ProfileAnchor
from rlsim.schedule_kinds import schedule_kind

if TYPE_CHECKING:
    from rlsim.loop.config import RunConfig

ANCHOR_RUNS = "anchor-runs"  # folder under the runs folder holding the anchor's runs 01, 02, ...
COMBINE = (
    "geometric mean of the anchor's measured/predicted step ratio in the anchor runs just before and just after "
    "the configuration"
)
FLOOR = "|change| of the anchor's measured step between consecutive anchor runs: mean with a 95% t-interval, median"
ANCHORED_FLOOR = (
    "|anchored error| of the anchor itself: each inner anchor run against the geometric mean of its neighbours; "
    "mean with a 95% t-interval, median"
)
UNEVEN_AT_LEAST = 0.03  # the phases' drifts must spread by this much (or the anchored floor) to be named
PHASE_SHARE_AT_LEAST = 0.05  # phases under this share of the anchor's step are too small to read a drift from


@dataclass(frozen=True)
class Anchor:
    """The anchor configuration, resolved from its calibration set, and where that set is."""

    case: LoopCase
    warmup_steps: int
    set_path: Path

    @property
    def name(self) -> str:
        return self.case.name


def resolve_anchor(
    spec: AnchorSpec,
    base_dir: Path,
    validation_names: Sequence[str],
    source: str,
    calibrated: CalibrationSet | None = None,
) -> Anchor:
    """The anchor named by ``spec``: a configuration of the calibration set ``spec.set`` with the run config
    that set gives it (the validation set's own settings and ``--set`` overrides do not reach it).

    Raises RlsimError when the set has no such configuration, when it is an async one (compared on
    throughput, so its step time is no clock), when ``calibrated`` (the profile's record of what it was
    fitted on) holds no configuration with that run config, or when a validation configuration takes its
    folder name. Profiles made before rlsim kept that record (None) are checked against the set file only."""
    set_path = resolve_path(base_dir, spec.set)
    if not set_path.is_file():
        raise RlsimError(f"{source}: anchor.set {spec.set} is not a file; name the profile's calibration loop set")
    calibration, cal_dir = load_loop_set(set_path)
    names = [e.name for e in calibration.configs]
    if spec.config not in names:
        raise RlsimError(
            f"{source}: anchor.config {spec.config!r} is not a configuration of the calibration set {set_path} "
            f"(it has: {', '.join(names)}); the anchor must be one the profile was fitted on, so that what moves "
            "between its runs is the host, not the model"
        )
    case = next(c for c in resolve_cases(calibration, cal_dir, source=str(set_path)) if c.name == spec.config)
    check_anchor_case(case, source, validation_names)
    if calibrated is not None and not any(same_run_config(c, case.config) for c in calibrated.configs.values()):
        raise RlsimError(
            f"{source}: anchor {spec.config!r} of {set_path} is not one of the configurations the profile was "
            f"calibrated on ({', '.join(calibrated.configs)} of {calibrated.loop_set}, with their settings then); "
            "name one of those, or re-profile with this set"
        )
    return Anchor(case, calibration.warmup_steps, set_path)


def check_anchor_case(case: LoopCase, source: str, validation_names: Sequence[str] = ()) -> None:
    """Raise RlsimError when ``case`` cannot anchor: an async schedule (compared on throughput, so its step
    time is no clock), or a validation configuration named like the anchor runs' folder."""
    if schedule_kind(case.config.schedule).pipelined:
        raise RlsimError(
            f"{source}: anchor {case.name!r} runs the async schedule, which is compared on throughput; "
            "anchor on a sequential or overlapped configuration (its step time is the host's clock)"
        )
    if ANCHOR_RUNS in validation_names:
        raise RlsimError(f"{source}: a configuration is named {ANCHOR_RUNS!r}, the anchor runs' folder; rename it")


def same_run_config(stored: dict[str, Any], config: RunConfig) -> bool:
    """Whether a run config stored as JSON (by an earlier rlsim, say) reads today as ``config``: settings
    added since, at their defaults, make no difference (as ``--reuse`` decides)."""
    from rlsim.loop.config import RunConfig

    try:
        return RunConfig.model_validate(stored).model_dump(mode="json") == config.model_dump(mode="json")
    except ValidationError:
        return False


def anchor_from_profile(
    recorded: ProfileAnchor, profile_path: Path, validation_names: Sequence[str], source: str
) -> Anchor:
    """The anchor the profile kept (``rlsim profile`` with ``anchor:``), for a validation set that names none.
    A stored config today's rlsim cannot read is a ConfigError naming the profile."""
    from rlsim.loop.config import RunConfig

    config = validate(RunConfig, recorded.run_config, source=f"profile {profile_path}: anchor.run_config")
    case = LoopCase(recorded.config, "the profile's anchor", config, warmup_steps=recorded.warmup_steps)
    check_anchor_case(case, f"{source} (the anchor kept in {profile_path})", validation_names)
    return Anchor(case, recorded.warmup_steps, Path(f"{recorded.loop_set} (kept in {profile_path})"))


def anchor_run_record(index: int, entry: dict[str, Any]) -> dict[str, Any]:
    """What one anchor run measured (from its validation entry), with the host ratios it gives."""
    phases = {
        p: {**v, "ratio": v["measured"] / v["predicted"]}
        for p, v in entry["phases_s"].items()
        if v["predicted"] > 0 and v["measured"] > 0
    }
    return {
        "index": index,
        "run_dir": entry["run_dir"],
        "reused": entry["reused"],
        "finished_at": finished_at(Path(entry["run_dir"]) / "results.json"),
        "predicted_step_s": entry["predicted_step_s"],
        "measured_step_s": entry["measured_step_s"],
        "ratio": entry["measured_step_s"] / entry["predicted_step_s"],
        "phases_s": phases,
        "foreign_cpu_share": entry["foreign_cpu_share"],
        "dropped_steps": entry["dropped_steps"],
    }


def profile_hour_step(anchor: Anchor, recorded: ProfileAnchor | None) -> tuple[float | None, str]:
    """The anchor's measured step at the profile's hour, when the profile kept it for this very run config;
    else None; and a line saying which."""
    if recorded is None:
        return None, "the profile keeps no anchor step (`anchor:` in its `rlsim profile` config)"
    if recorded.config != anchor.name:
        return None, f"the profile's anchor is {recorded.config}, not {anchor.name}"
    if not same_run_config(recorded.run_config, anchor.case.config):
        return None, f"the profile's {recorded.config} ran with other settings than {anchor.set_path} gives it now"
    said = f"{recorded.config} measured {recorded.measured_step_s:.2f} s at {recorded.measured_at}"
    return recorded.measured_step_s, said


def _scaled(entry: dict[str, Any], ratio: float) -> float:
    """``entry``'s error with its prediction scaled by the host ratio (slower host: longer step, fewer rollouts/h)."""
    if entry.get("metric") == "rollouts_trained_per_hour":
        return float((1 + entry["error"]) / ratio - 1)
    return float((1 + entry["error"]) * ratio - 1)


def apply_anchor(
    entry: dict[str, Any], before: dict[str, Any], after: dict[str, Any], profile_step_s: float | None = None
) -> None:
    """Add the anchored error (and per phase) to ``entry``, measured between anchor runs ``before`` and ``after``;
    with ``profile_step_s`` (the anchor's step at the profile's hour) the profile-hour error too."""
    ratio = math.sqrt(before["ratio"] * after["ratio"])
    entry["anchor_runs"] = [before["index"], after["index"]]
    entry["anchor_ratio"] = ratio
    entry["anchored_error"] = _scaled(entry, ratio)
    if profile_step_s is not None:
        now = math.sqrt(before["measured_step_s"] * after["measured_step_s"])
        entry["profile_hour_error"] = _scaled(entry, now / profile_step_s)
    phases = {}
    readable = set(_readable_phases(before)) & set(_readable_phases(after))
    for p, v in (entry.get("phases_s") or {}).items():
        if p in readable and v["predicted"] > 0 and v["measured"] > 0:
            r = math.sqrt(before["phases_s"][p]["ratio"] * after["phases_s"][p]["ratio"])
            phases[p] = v["predicted"] * r / v["measured"] - 1
    entry["anchored_phase_errors"] = phases


def anchor_summary(
    anchor: Anchor, runs: Sequence[dict[str, Any]], hour: tuple[float | None, str] = (None, "")
) -> dict[str, Any]:
    """The anchor section of the report: its runs, the host's drift over them and the identical-run floor, and
    (``hour``: ``profile_hour_step``'s answer) the drift since the profile and the model's error on the anchor."""
    measured = [r["measured_step_s"] for r in runs]
    then, said = hour
    changes = _phase_changes(runs)
    summary: dict[str, Any] = {
        "config": anchor.name,
        "set": str(anchor.set_path),
        "combine": COMBINE,
        "runs": list(runs),
        "raw_errors": [r["predicted_step_s"] / r["measured_step_s"] - 1 for r in runs],
        "drift": measured[-1] / measured[0] - 1 if len(measured) > 1 else None,
        "phase_drift": changes[-1] if changes else {},
        "floor": identical_run_floor(measured),
        "profile_anchor": said,
        "drift_since_profile": measured[0] / then - 1 if then is not None and measured else None,
        "model_error": runs[0]["predicted_step_s"] / then - 1 if then is not None and runs else None,
    }
    summary["uneven"] = uneven_drift(changes, summary["floor"], anchor.name)
    return summary


def identical_run_floor(measured: Sequence[float]) -> dict[str, Any] | None:
    """``FLOOR`` over the anchor's measured steps (None with fewer than two runs; no CI with fewer than three).

    ``anchored``: the same for the anchored error an identical configuration would get, each inner anchor run
    against the geometric mean of its two neighbours (``ANCHORED_FLOOR``; None with fewer than three runs). A
    steady drift moves consecutive runs apart (the raw floor) but is taken out by the neighbours' mean."""
    if len(measured) < 2:
        return None
    m = np.asarray(measured, dtype=float)
    floor = {"definition": FLOOR, **_abs_spread(m[1:] / m[:-1] - 1.0)}
    inner = m[1:-1] / np.sqrt(m[:-2] * m[2:]) - 1.0
    floor["anchored"] = {"definition": ANCHORED_FLOOR, **_abs_spread(inner)} if inner.size else None
    return floor


def _abs_spread(changes: np.ndarray) -> dict[str, Any]:
    """Mean |change| with a t-interval (from two values on), median, count."""
    x = np.abs(changes)
    out: dict[str, Any] = {
        "n": int(x.size),
        "mean_abs_change": float(x.mean()),
        "median_abs_change": float(np.median(x)),
        "ci_low": None,
        "ci_high": None,
    }
    if x.size >= 2:
        ci = mean_ci(x.tolist())
        out.update(ci_low=max(0.0, ci.ci_low), ci_high=ci.ci_high)
    return out


def _readable_phases(run: dict[str, Any]) -> list[str]:
    """The phases of an anchor run big enough to read a ratio from (``PHASE_SHARE_AT_LEAST`` of its step)."""
    return [
        p
        for p, v in run["phases_s"].items()
        if p != "total" and v["measured"] >= PHASE_SHARE_AT_LEAST * run["measured_step_s"]
    ]


def _phase_changes(runs: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """For each anchor run after the first, each readable phase's measured time over the first run's - 1."""
    if len(runs) < 2:
        return []
    first = runs[0]
    phases = [p for p in _readable_phases(first) if all(p in r["phases_s"] for r in runs)]
    return [{p: r["phases_s"][p]["measured"] / first["phases_s"][p]["measured"] - 1 for p in phases} for r in runs[1:]]


def uneven_drift(changes: Sequence[dict[str, float]], floor: dict[str, Any] | None, name: str) -> str | None:
    """A sentence naming the phase that moved most in the anchor run where the phases' changes since the first
    run spread the most, when that spread exceeds the anchored floor (at least ``UNEVEN_AT_LEAST``); else None."""
    spreads = [max(c.values()) - min(c.values()) if len(c) > 1 else 0.0 for c in changes]
    if not spreads:
        return None
    worst = int(np.argmax(spreads))
    floor_here = (floor.get("anchored") or floor) if floor else None
    limit = max(UNEVEN_AT_LEAST, floor_here["mean_abs_change"] if floor_here else 0.0)
    if spreads[worst] <= limit:
        return None
    ordered = sorted(changes[worst].items(), key=lambda kv: -abs(kv[1]))
    moved = ", ".join(f"{p} {d:+.1%}" for p, d in ordered)
    return (
        f"the host's drift was uneven across phases, most in {ordered[0][0]} (anchor run {worst + 2} against run 1: "
        f"{moved}; a spread over {limit:.1%}). Anchoring scales a prediction by {name}'s step as a whole, so a "
        "configuration whose phase mix differs from the anchor's keeps part of that drift; read its "
        "anchored_phase_errors"
    )
