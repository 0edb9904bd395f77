"""How well a profile predicts a log's steps: per step, the whole run, and held out.

``replay`` compares a profile's simulated steps with a log's (``rlsim plan replay LOG --profile P`` and
``rlsim profile --from-log``'s check). Errors are relative, ``simulated / logged - 1``, on the step without
its periodic phases (validation and checkpoint, which the per-step fit leaves out); the whole run's
total adds those phases as they were logged, so the run's wall time is compared, not only a typical step.
``holdout`` fits on the earlier part of the log and replays the later part, the error to trust when
the fit has few steps per parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlsim.planner.profile.fitting.logs import LogLayout, fit_log_profile, generation_fixed_s, replay_phases
from rlsim.planner.profile.logs.frameworks import LogFormat, LoggedStep
from rlsim.planner.profile.schema import Profile

HOLDOUT_FIT_SHARE = 2 / 3
MIN_HOLDOUT_STEPS = 6  # 4 fitted steps at least and 2 held out


@dataclass(frozen=True)
class Replay:
    """Simulated vs logged seconds of each step and of the whole run (periodic phases as logged), and
    per phase ``{name: (logged, simulated)}`` seconds of each step."""

    logged_s: list[float]
    simulated_s: list[float]
    periodic_s: float
    phases: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)

    @property
    def phase_median_abs_error(self) -> dict[str, float]:
        """Per phase the median |simulated / logged - 1| over the steps that logged it (> 0.01 s)."""
        out = {}
        for name, (logged, simulated) in self.phases.items():
            e = sorted(abs(s / g - 1.0) for g, s in zip(logged, simulated, strict=True) if g > 0.01)
            if e:
                out[name] = _median(e)
        return out

    @property
    def errors(self) -> list[float]:
        return [sim / log - 1.0 for sim, log in zip(self.simulated_s, self.logged_s, strict=True)]

    @property
    def median_abs_error(self) -> float:
        return _median(sorted(abs(x) for x in self.errors))

    @property
    def max_abs_error(self) -> float:
        return float(max(abs(x) for x in self.errors))

    @property
    def logged_total_s(self) -> float:
        return sum(self.logged_s) + self.periodic_s

    @property
    def simulated_total_s(self) -> float:
        return sum(self.simulated_s) + self.periodic_s

    @property
    def total_error(self) -> float:
        return self.simulated_total_s / self.logged_total_s - 1.0


def _median(sorted_values: list[float]) -> float:
    e, n = sorted_values, len(sorted_values)
    return float(e[n // 2]) if n % 2 else float((e[n // 2 - 1] + e[n // 2]) / 2)


def replay(profile: Profile, steps: list[LoggedStep], layout: LogLayout) -> Replay:
    """``profile``'s prediction of every step of ``steps``, of each phase, and of their run's total.

    Generation's fixed per-step term, which the profile carries in its overhead, is counted as
    generation here, so each phase compares with the phase the framework timed."""
    simulated = replay_phases(profile, steps, layout)
    fixed = generation_fixed_s(profile)
    phases = {
        "generation": ([s.gen_s for s in steps], [t["generate"] + fixed for t in simulated]),
        "scoring": ([s.score_s for s in steps], [t["score_tail"] for t in simulated]),
        "update": ([s.update_s for s in steps], [t["update"] for t in simulated]),
        "sync": ([s.sync_s for s in steps], [t["sync"] for t in simulated]),
    }
    return Replay([s.train_s for s in steps], [t["total"] for t in simulated], sum(s.periodic_s for s in steps), phases)


def holdout(fmt: LogFormat, steps: list[LoggedStep], layout: LogLayout, hardware_kind: str) -> Replay | None:
    """Fit on the first two thirds of ``steps``, replay the rest (None when the log is too short)."""
    if len(steps) < MIN_HOLDOUT_STEPS:
        return None
    cut = max(4, round(len(steps) * HOLDOUT_FIT_SHARE))
    profile = fit_log_profile(fmt, steps[:cut], layout, hardware_kind, notes=[])
    return replay(profile, steps[cut:], layout)
