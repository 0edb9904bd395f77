"""Simulate a placement for several steps and summarise: step time, rollouts/hour, utilisation, bottleneck."""

from __future__ import annotations

from collections.abc import Callable

from rlsim.planner.profile.schema import Profile
from rlsim.planner.sim.ppo_roles import RolesSpec, check_roles
from rlsim.planner.sim.step import StepInputs, simulate_step
from rlsim.planner.sim.summary import STRAGGLER_RATIO, Evaluation, bottleneck, summarise, utilisation
from rlsim.planner.sim.update_steps import UpdateShape, check_priceable
from rlsim.planner.spec.cluster import NodeSpec, PlacementSpec
from rlsim.planner.spec.placement import PlacementError, resolve
from rlsim.planner.spec.workload import Workload
from rlsim.schedule_kinds import SCHEDULES, schedule_kind

__all__ = ["STRAGGLER_RATIO", "Evaluation", "bottleneck", "evaluate", "evaluate_steps", "summarise", "utilisation"]


def evaluate(
    node: NodeSpec,
    profile: Profile,
    workload: Workload,
    spec: PlacementSpec,
    steps: int,
    seed: int = 0,
    noise: bool = True,
    on_step: Callable[[int], None] | None = None,
    roles: RolesSpec | None = None,
    update: UpdateShape | None = None,
) -> Evaluation:
    """Simulate ``steps`` steps of ``spec``; raises ``PlacementError`` before simulating if impossible.
    ``roles``: PPO's reference and critic (``sim/ppo_roles.py``), None for a GRPO step; ``update``: the
    trainer's micro/mini-batches and epochs (``sim/update_steps.py``; None: one step, as profiled)."""
    resources = resolve(node, profile, spec)
    inputs = StepInputs(
        spec=spec,
        resources=resources,
        profile=profile,
        workload=workload,
        noise=noise,
        roles=roles,
        update=update or UpdateShape(),
    )
    check_roles(inputs)
    try:
        check_priceable(profile.roles, inputs.update, resources.train_units)
    except ValueError as err:
        raise PlacementError(str(err)) from err
    kind = schedule_kind(spec.schedule)
    if roles is not None and not kind.experience_roles:
        raise PlacementError(
            f"the planner's {kind.name} schedule models GRPO's roles only; plan PPO with "
            + " or ".join(k for k, s in SCHEDULES.items() if s.experience_roles)
        )
    simulate: Callable[..., Evaluation] = kind.load(kind.simulator)
    return simulate(inputs, steps, seed, on_step)


def evaluate_steps(
    inputs: StepInputs, steps: int, seed: int = 0, on_step: Callable[[int], None] | None = None
) -> Evaluation:
    """A step-by-step schedule (sequential, overlapped): ``steps`` independent steps, summarised."""
    results = []
    for step in range(steps):
        results.append(simulate_step(inputs, seed, step))
        if on_step:
            on_step(step)
    return summarise(inputs.spec, inputs.resources, results, inputs.profile.illustrative)
