"""The schedules rlsim runs and simulates, and what each one is: the one place their names are compared.

A schedule says in what order a step's phases run. The loop (``rlsim.loop.driver``), the planner's simulator
(``rlsim.planner.sim.evaluate``), the contention experiment and ``rlsim plan validate`` ask a schedule's entry
what it does and needs instead of comparing its name: ``streams`` (scoring starts on each micro-batch while
generation goes on, so the two contend on a shared pool), ``pipelined`` (generation runs ahead of training
across steps within a staleness bound, so a step is the time between two weight syncs and a run is compared on
rollouts trained per hour), what the trainer and the generator must support, and the functions that run one
step in the loop and simulate a placement in the planner, named ``"module:function"`` and imported on first use
(the planner imports no loop module, and this module imports neither).

A new schedule is one module holding its loop step (``step(session, step, kind, progress)`` returning the
step's record and timeline rows, as ``rlsim.loop.driver.sync_step`` does) plus an entry here; its name joins
``ScheduleName`` so configs accept it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal, get_args

from rlsim.errors import RlsimError

ScheduleName = Literal["sequential", "overlapped", "async"]


@dataclass(frozen=True)
class ScheduleKind:
    """One schedule. ``loop_step``/``simulator``/``together``: ``"module:function"``, loaded by ``load``: its step
    in the loop, its planner simulator, and its together condition in the contention experiment; ``reports``: the
    sections it adds to the experiment's figures and report."""

    name: str
    summary: str
    streams: bool
    pipelined: bool
    behaviour_logprobs: bool  # the trainer corrects off-policy rollouts with the generator's own log-probs
    weight_swap_mid_call: bool  # may load new weights into a running generation (partial rollouts)
    algorithms: tuple[str, ...]  # trainer.algorithm values it trains
    experience_roles: bool  # can run PPO's reference and critic (and a KL penalty)
    loop_step: str
    simulator: str
    together: str
    reports: tuple[str, ...]  # "module:ATTRIBUTE" of each ReportSection (rlsim.experiment.formatting) it adds

    def load(self, target: str) -> Any:
        """What ``target`` (``loop_step``, ``simulator``, ``together`` or one of ``reports``) names, imported now:
        a function, or for ``reports`` a ``ReportSection``."""
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)


_SYNC_SIMULATOR = "rlsim.planner.sim.evaluate:evaluate_steps"
# The contention experiment measures a step-by-step schedule's together condition as one overlapped step.
_SYNC_TOGETHER = "rlsim.experiment.conditions:overlapped_together"

SCHEDULES: dict[str, ScheduleKind] = {
    kind.name: kind
    for kind in (
        ScheduleKind(
            name="sequential",
            summary="generate every rollout, then score them all, then update and sync (most frameworks' default)",
            streams=False,
            pipelined=False,
            behaviour_logprobs=False,
            weight_swap_mid_call=False,
            algorithms=("grpo", "rloo", "ppo"),
            experience_roles=True,
            loop_step="rlsim.loop.driver:sync_step",
            simulator=_SYNC_SIMULATOR,
            together=_SYNC_TOGETHER,
            reports=("rlsim.experiment.role_analysis:ROLES_REPORT",),
        ),
        ScheduleKind(
            name="overlapped",
            summary="finished rollouts are scored in micro-batches while generation goes on",
            streams=True,
            pipelined=False,
            behaviour_logprobs=False,
            weight_swap_mid_call=False,
            algorithms=("grpo", "rloo", "ppo"),
            experience_roles=True,
            loop_step="rlsim.loop.driver:sync_step",
            simulator=_SYNC_SIMULATOR,
            together=_SYNC_TOGETHER,
            reports=("rlsim.experiment.role_analysis:ROLES_REPORT",),
        ),
        ScheduleKind(
            name="async",
            summary="generation runs ahead of training within a staleness bound (off-policy, importance-corrected)",
            streams=True,
            pipelined=True,
            behaviour_logprobs=True,
            weight_swap_mid_call=True,
            algorithms=("grpo", "rloo"),
            experience_roles=False,
            loop_step="rlsim.loop.schedules.asynchronous.session:async_step",
            simulator="rlsim.planner.sim.asynchronous.evaluate:evaluate_async",
            together="rlsim.experiment.asynchronous.condition:async_together",
            reports=("rlsim.experiment.asynchronous.analysis:ASYNC_REPORT",),
        ),
    )
}
assert tuple(SCHEDULES) == get_args(ScheduleName), "every schedule has an entry and a name configs accept"


def schedule_kind(name: str) -> ScheduleKind:
    """The entry of ``name``; ``RlsimError`` naming the valid ones if there is none."""
    if name not in SCHEDULES:
        raise RlsimError(f"unknown schedule {name!r}; valid: {', '.join(SCHEDULES)}")
    return SCHEDULES[name]
