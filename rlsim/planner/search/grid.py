"""Search placements: enumerate the grid, drop impossible ones (with reasons), simulate, rank.

Objectives: ``rollouts_per_hour`` ranks by throughput; ``fewest_resources`` keeps placements whose
mean step time meets the target and ranks them by nodes, then GPUs, then cores used, then
throughput. A colocated placement has no scoring share, and only an async one a staleness bound, so the grid
does not repeat a placement per value that means nothing to it. Async placements are ranked by their
steady rollouts trained per hour (``sim.asynchronous.evaluate``), the other schedules by rollouts per hour.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rlsim.errors import RlsimError
from rlsim.planner.profile.schema import Profile
from rlsim.planner.sim.evaluate import Evaluation, evaluate
from rlsim.planner.sim.update_steps import UpdateShape
from rlsim.planner.spec.cluster import NodeSpec, PlacementSpec, SearchSpec
from rlsim.planner.spec.placement import PlacementError, check_devices, resolve
from rlsim.planner.spec.workload import Workload
from rlsim.schedule_kinds import schedule_kind


@dataclass(frozen=True)
class Candidates:
    """Feasible placements to simulate, and the rejected ones with the reason for each."""

    feasible: list[PlacementSpec]
    rejected: list[tuple[PlacementSpec, str]]


def enumerate_placements(search: SearchSpec) -> list[PlacementSpec]:
    """Every distinct placement of the grid, in a fixed order (deterministic)."""
    seen: set[str] = set()
    out = []
    # typeshed types a product of more than 6 iterables as one union for every item; unpacked by name below.
    grid: Iterable[tuple[Any, ...]] = itertools.product(
        search.runtimes,
        search.batchers,
        search.schedules,
        search.colocated,
        search.scoring_shares,
        search.replicas_per_node,
        search.engine_units,
        search.nodes,
        search.tp,
        search.pp,
        search.train_nodes,
        search.max_staleness,
    )
    for runtime, batcher, schedule, colocated, share, replicas, eng, nodes, tp, pp, train, stale in grid:
        spec = PlacementSpec(
            runtime=runtime,
            batcher=batcher,
            schedule=schedule,
            colocated=colocated,
            scoring_share=0.0 if colocated else share,
            replicas_per_node=replicas,
            engine_units=None if tp * pp > 1 else eng,
            nodes=nodes,
            tp=tp,
            pp=pp,
            train_nodes=train,
            max_staleness=stale if schedule_kind(schedule).pipelined else 1,  # the bound means nothing to the others
        )
        key = spec.model_dump_json()
        if key not in seen:
            seen.add(key)
            out.append(spec)
    return out


def candidates(node: NodeSpec, profile: Profile, search: SearchSpec) -> Candidates:
    """Split the grid into feasible and rejected placements; errors that no placement can escape raise.

    A runtime the profile lacks, or a CUDA model on a cluster without GPUs, is a problem with the
    input rather than with one placement, so it raises at once (before anything is simulated).
    """
    for runtime in search.runtimes:
        check_devices(node, profile, runtime)
    specs = enumerate_placements(search)
    if len(specs) > search.max_placements:
        raise RlsimError(
            f"the search grid has {len(specs)} placements, more than search.max_placements "
            f"({search.max_placements}); shrink a list or raise max_placements"
        )
    feasible, rejected = [], []
    for spec in specs:
        try:
            resolve(node, profile, spec)
        except PlacementError as err:
            rejected.append((spec, str(err)))
        else:
            feasible.append(spec)
    if not feasible:
        reasons = sorted({reason for _, reason in rejected})
        raise RlsimError("no placement in the search grid fits the cluster:\n  - " + "\n  - ".join(reasons))
    return Candidates(feasible, rejected)


def run_search(
    node: NodeSpec,
    profile: Profile,
    workload: Workload,
    search: SearchSpec,
    found: Candidates,
    target_step_s: float | None = None,
    seed: int = 0,
    noise: bool = True,
    on_done: Callable[[Evaluation], None] | None = None,
    update: UpdateShape | None = None,
) -> list[Evaluation]:
    """Simulate every feasible placement for ``search.steps`` steps; returns them ranked best first.
    ``update``: the trainer's micro/mini-batches and epochs (None: one optimizer step)."""
    evaluations = []
    for spec in found.feasible:
        ev = evaluate(node, profile, workload, spec, search.steps, seed=seed, noise=noise, update=update)
        evaluations.append(ev)
        if on_done:
            on_done(ev)
    return rank(evaluations, search, target_step_s)


def rank(evaluations: list[Evaluation], search: SearchSpec, target: float | None = None) -> list[Evaluation]:
    """Best first for the search's objective; with a target (seconds), those missing it come last."""

    def meets(ev: Evaluation) -> bool:
        return target is None or ev.step_time_s <= target

    if search.objective == "fewest_resources":

        def key(ev: Evaluation) -> tuple[float, ...]:
            used = ev.resources.units_used()
            return (not meets(ev), used["nodes"], used["gpus"], used["cores"], -ev.rollouts_per_hour)
    else:

        def key(ev: Evaluation) -> tuple[float, ...]:
            return (not meets(ev), -ev.rollouts_per_hour)

    return sorted(evaluations, key=key)
