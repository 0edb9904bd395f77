"""One logged step as the planner's phases (``LoggedStep``), and the checked reads of a step's values.

Every value a fit uses is read through ``StepValues.get``: present, not null, finite, not negative and
within its kind's range (``RANGES``), else a ``Problem`` whose message names the line, the key and the
fix. The ranges are checked before anything is allocated from a value (a step's rollout count sizes its
replayed trace), so a corrupt ``perf/total_num_tokens`` of 1e12 is one line of error, not 20 GB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlsim.planner.profile.logs.records import Value

MAX_ROLLOUTS_PER_STEP = 1 << 20
MAX_ROLLOUTS_PER_LOG = 4_000_000
RANGES = {  # kind: (lowest, highest, unit, what it is)
    "time": (0.0, 1e6, "s", "a phase time"),
    "length": (0.0, 1e7, "tokens", "a mean or max length"),
    "tokens": (1.0, 1e11, "tokens", "a step's token count"),
    "count": (1.0, float(MAX_ROLLOUTS_PER_STEP), "rollouts", "a step's rollout count"),
}


@dataclass(frozen=True)
class LoggedStep:
    """One logged RL step: ``rollouts`` sequences, mean prompt/response lengths, the longest response,
    the seconds of each planner phase (``step_s`` as logged, the others as ``frameworks.py`` maps them), and the
    periodic phases (validation, checkpoint: ``(name, seconds)``) timed on this step, inside
    ``step_s`` when ``periodic_in_step``."""

    line: int
    rollouts: int
    prompt_mean: float
    response_mean: float
    response_max: float
    gen_s: float
    score_s: float
    update_s: float
    sync_s: float
    step_s: float
    periodic: tuple[tuple[str, float], ...] = ()
    periodic_in_step: bool = True

    @property
    def periodic_s(self) -> float:
        return sum(s for _, s in self.periodic)

    @property
    def train_s(self) -> float:
        """The step without its periodic phases: what the per-step fit reproduces (seconds)."""
        return self.step_s - (self.periodic_s if self.periodic_in_step else 0.0)

    @property
    def wall_s(self) -> float:
        """The step's share of the run's wall time, periodic phases included (seconds)."""
        return self.train_s + self.periodic_s


class Problem(Exception):
    """One unusable value of one step line (its message names the line, the key and the fix)."""


class StepValues:
    """Checked reads of one record's values."""

    def __init__(self, values: dict[str, Value], line: int, where: str = "line") -> None:
        self.values, self.line, self.where = values, line, where

    def has(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str, kind: str, default: float | None = None) -> float:
        if key not in self.values:
            if default is not None:
                return default
            raise Problem(f"{self.where} {self.line}: {key} is missing; {fix_text(kind)}")
        v = self.values[key]
        lo, hi, unit, _ = RANGES[kind]
        if v is None:
            raise Problem(f"{self.where} {self.line}: {key} is null; {fix_text(kind)}")
        if not math.isfinite(v):
            raise Problem(f"{self.where} {self.line}: {key} is {v}; {fix_text(kind)}")
        if v < 0:
            raise Problem(f"{self.where} {self.line}: {key} is negative ({v:g}); {fix_text(kind)}")
        if v < lo or v > hi:
            raise Problem(f"{self.where} {self.line}: {key} is {v:g}, outside {lo:g}..{hi:g} {unit}; {fix_text(kind)}")
        return float(v)


def fix_text(kind: str) -> str:
    lo, hi, unit, what = RANGES[kind]
    return f"{what} must be a number from {lo:g} to {hi:g} {unit}: fix or delete that line"
