"""What a simulated step takes and gives (``StepInputs``, ``StepResult``), shared by ``sim/step.py`` and the
experience roles it calls (``sim/ppo_roles.py``), so neither imports the other's internals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rlsim.planner.profile.scaling import RewardFunctionModel
from rlsim.planner.profile.schema import ContentionEntry, Profile, ScorerLatencyModel
from rlsim.planner.sim.scoring import ScoringOutcome
from rlsim.planner.sim.update_steps import UpdateShape
from rlsim.planner.spec.cluster import PlacementSpec
from rlsim.planner.spec.placement import Resources
from rlsim.planner.spec.workload import Workload

if TYPE_CHECKING:
    from rlsim.planner.sim.ppo_roles import RolesSpec

PHASES = ("generate", "score", "update", "sync", "idle")
# The critical path: these add up to the step time (``score_tail``: rewards still missing after the
# last rollout is generated). ``score`` itself is reported as the loop does, the wall time during
# which some scorer was busy, which overlaps generation in the overlapped schedule.
CRITICAL_PATH = ("generate", "score_tail", "update", "sync", "idle")


@dataclass(frozen=True)
class StepResult:
    """One step. ``time_s`` has the loop's breakdown (issue 4: each phase the union of its busy
    intervals, so phases overlap when overlapped), ``score_tail`` and ``total``; busy in unit-seconds."""

    time_s: dict[str, float]
    rollouts: int
    tokens: int
    gen_busy_unit_s: float
    score_busy_unit_s: float
    engine_makespan_mean_s: float
    engine_makespan_max_s: float
    idle_engines: int
    batches: int
    padding_waste: float
    rounds: int


@dataclass(frozen=True)
class StepInputs:
    """What a step needs besides the random lengths: the placement, its resources and the profile."""

    spec: PlacementSpec
    resources: Resources
    profile: Profile
    workload: Workload
    noise: bool = True
    roles: RolesSpec | None = None  # PPO's reference and critic (sim/ppo_roles.py); None: GRPO
    update: UpdateShape = UpdateShape()  # the update's micro/mini-batches and epochs (sim/update_steps.py)

    @property
    def scorer(self) -> ScorerLatencyModel:
        return self.profile.runtime(self.spec.runtime)

    @property
    def function(self) -> RewardFunctionModel | None:
        """The rule-based reward the placement names, or None when a reward model scores."""
        return self.profile.reward_functions.get(self.spec.runtime)

    @property
    def contention(self) -> ContentionEntry:
        assert self.profile.contention is not None
        return self.profile.contention.for_runtime(self.spec.runtime)


def union_s(outcome: ScoringOutcome) -> float:
    """Seconds during which at least one replica was busy (overlapping batches counted once)."""
    starts = np.array([x for xs in outcome.busy_starts for x in xs])
    if not starts.size:
        return 0.0
    ends = np.array([x for xs in outcome.busy_ends for x in xs])
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    # A new covered stretch begins where a batch starts after everything before it has ended.
    new = np.concatenate([[True], starts[1:] > reach[:-1]])
    seg_start = starts[new]
    seg_end = reach[np.concatenate([np.flatnonzero(new)[1:] - 1, [len(starts) - 1]])]
    return float(np.sum(seg_end - seg_start))
