"""Settings and grid of ``rlsim bench scoring``: runtimes x batchers x batch sizes (or token budgets).

Everything a user can get wrong is checked here, all at once, before any process starts: sizes,
budgets against the workload's longest sequence, repeat count, unknown or uninstalled runtimes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rlsim.batching.base import batcher_names
from rlsim.errors import RlsimError
from rlsim.registry import import_modules
from rlsim.rewards.options import reward_sections
from rlsim.scoring import SCORERS, unavailable_reason
from rlsim.workloads import LognormalLengths, WorkloadSpec

DEFAULT_BASELINE = "eager/fixed/32"
PLUGINS_ENV = "RLSIM_PLUGINS"


def import_plugins() -> None:
    """Import the modules named in ``$RLSIM_PLUGINS`` (comma-separated), e.g. ones that register a
    custom runtime with ``@register_scorer``; the benchmark and its worker processes both do this
    (``rlsim bench scoring --import MODULE`` adds to it, so the workers import it too)."""
    import_modules(filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))), PLUGINS_ENV)


def add_plugins(modules: list[str]) -> None:
    """Name ``modules`` in ``$RLSIM_PLUGINS`` (which worker processes inherit) and import them here."""
    named = [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]
    os.environ[PLUGINS_ENV] = ",".join(dict.fromkeys([*named, *modules]))
    import_modules(modules, "--import")


def sized_batchers() -> list[str]:
    """Batchers sized by a sequence count (take ``batch_sizes``)."""
    return batcher_names("size")


def budget_batchers() -> list[str]:
    """Batchers sized by a padded-token budget (take ``budgets``)."""
    return batcher_names("budget")


def issue_workload(count: int = 256, seed: int = 0) -> WorkloadSpec:
    """The workload the benchmark targets: responses lognormal, mean 200 tokens, sigma 0.6, 16..512."""
    return WorkloadSpec(count=count, seed=seed, response=LognormalLengths(mean=200, sigma=0.6, min=16, max=512))


class BenchScoringConfig(BaseModel):
    """One benchmark run. ``settings`` holds ``ScorerSettings`` fields (threads, spinning, ...)."""

    model_config = ConfigDict(extra="forbid")

    model: str = "minilm-rm"
    runtimes: list[str] = Field(default_factory=lambda: ["eager", "ort"], min_length=1)
    batchers: list[str] = Field(default_factory=batcher_names, min_length=1)
    batch_sizes: list[int] = Field(default_factory=lambda: [8, 32, 64])
    budgets: list[int] = Field(default_factory=lambda: [8192])
    repeats: int = Field(5, description="fresh processes per cell; >= 2 for a confidence interval")
    warmup_passes: int = Field(1, ge=0, description="untimed passes over the workload before the timed one")
    workload: WorkloadSpec = Field(default_factory=issue_workload)
    settings: dict[str, Any] = Field(default_factory=dict)
    baseline: str = DEFAULT_BASELINE
    worker_timeout_s: float = Field(1800.0, gt=0)
    fidelity: bool = Field(True, description="score the fidelity corpus with each runtime; cells carry pair flips")
    reward: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="settings of rewards that are no model, by runtime (genrm: {...}); rlsim.rewards.options",
    )

    @field_validator("reward")
    @classmethod
    def _reward_sections(cls, values: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        try:
            return reward_sections(values, source="reward")
        except RlsimError as err:
            raise ValueError("; ".join(getattr(err, "errors", [str(err)]))) from None

    @model_validator(mode="after")
    def _sections_benchmarked(self) -> BenchScoringConfig:
        idle = sorted(set(self.reward) - set(self.runtimes))
        if idle:
            raise ValueError(
                f"reward sections {idle} apply to runtimes this benchmark does not run ({', '.join(self.runtimes)}); "
                "add the runtime or drop the section"
            )
        return self

    def settings_for(self, runtime: str) -> dict[str, Any]:
        """``settings`` with ``runtime``'s reward section as its options (what a cell's worker builds)."""
        return {**self.settings, "options": self.reward[runtime]} if runtime in self.reward else dict(self.settings)

    @field_validator("batch_sizes", "budgets")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        bad = [v for v in values if v < 1]
        if bad:
            raise ValueError(f"every value must be >= 1 (got {bad}); a batch needs at least one sequence")
        return values

    @field_validator("repeats")
    @classmethod
    def _two_repeats(cls, value: int) -> int:
        if value < 2:
            raise ValueError("must be >= 2: a confidence interval needs two independent runs")
        return value

    @field_validator("runtimes")
    @classmethod
    def _installed(cls, values: list[str]) -> list[str]:
        problems = check_runtimes(values)
        if problems:
            raise ValueError("; ".join(problems))
        return values

    @field_validator("baseline")
    @classmethod
    def _baseline(cls, value: str) -> str:
        try:
            cell = Cell.parse(value)
        except RlsimError as err:
            raise ValueError(str(err)) from None
        known = batcher_names()
        problems = (
            [] if cell.batcher in known else [f"baseline batcher {cell.batcher!r} is not one of {', '.join(known)}"]
        )
        problems += check_runtimes([cell.runtime])
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("batchers")
    @classmethod
    def _offline(cls, values: list[str]) -> list[str]:
        known = batcher_names()
        bad = [v for v in values if v not in known]
        if bad:
            raise ValueError(f"unknown batcher(s) {bad}; valid names: {', '.join(known)}")
        return values


@dataclass(frozen=True)
class Cell:
    """One grid point. Exactly one of ``batch_size`` (fixed/sorted) and ``token_budget`` is set."""

    runtime: str
    batcher: str
    batch_size: int | None = None
    token_budget: int | None = None

    @property
    def label(self) -> str:
        return f"{self.runtime}/{self.batcher}/{self.batch_size or self.token_budget}"

    @classmethod
    def parse(cls, label: str) -> Cell:
        """``eager/fixed/32`` or ``ort/token-budget/8192`` -> Cell."""
        parts = label.split("/")
        if len(parts) != 3 or not parts[2].isdigit():
            raise RlsimError(f"cell {label!r} is not RUNTIME/BATCHER/SIZE, e.g. {DEFAULT_BASELINE}")
        runtime, batcher, n = parts[0], parts[1], int(parts[2])
        if batcher in budget_batchers():
            return cls(runtime, batcher, token_budget=n)
        return cls(runtime, batcher, batch_size=n)


def grid_cells(cfg: BenchScoringConfig) -> list[Cell]:
    """Every cell of the grid, in run order, plus the baseline cell if the grid lacks it."""
    cells = []
    for runtime in cfg.runtimes:
        for batcher in cfg.batchers:
            if batcher in budget_batchers():
                cells += [Cell(runtime, batcher, token_budget=b) for b in cfg.budgets]
            else:
                cells += [Cell(runtime, batcher, batch_size=s) for s in cfg.batch_sizes]
    baseline = Cell.parse(cfg.baseline)
    if baseline not in cells:
        # Every cell is compared with the baseline, so it is measured even when outside the grid.
        cells.insert(0, baseline)
    return cells


def check_grid(cfg: BenchScoringConfig) -> list[str]:
    """Problems that pydantic cannot see (combinations); empty when the grid can run."""
    problems = []
    sized = [b for b in cfg.batchers if b in sized_batchers()]
    budgeted = [b for b in cfg.batchers if b in budget_batchers()]
    if sized and not cfg.batch_sizes:
        problems.append(f"batchers {'/'.join(sized)} need --batch-sizes (e.g. 8,32)")
    if budgeted and not cfg.budgets:
        problems.append(f"batcher {'/'.join(budgeted)} needs --budgets in tokens (e.g. 8192)")
    return problems


def check_runtimes(runtimes: list[str]) -> list[str]:
    """Unknown or not-installed runtimes, one message each naming the fix."""
    import_plugins()
    problems = []
    for name in dict.fromkeys(runtimes):
        if name not in SCORERS:
            refused = SCORERS.unknown_message(name) if SCORERS.refusal(name) else None
            problems.append(refused or f"unknown runtime {name!r}; valid names: {SCORERS.valid_names()}")
            continue
        reason = unavailable_reason(name)
        if reason:
            problems.append(f"{reason}; or drop it")
    return problems
