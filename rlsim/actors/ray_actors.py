"""The loop's workers as Ray actors in one placement group: one bundle per actor, in config order.

Ray's CPU counts here are bookkeeping (what the placement group reserves); the workers pin their own
processes to their cores. Creation never hangs: the placement group and the actors' start (which
includes vLLM's engine start) each wait at most their configured timeout, then say what to change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rlsim.actors.role_workers import ColocatedWorker, CriticWorker, ReferenceWorker
from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.errors import RlsimError
from rlsim.placement import ActorUnit, ResolvedPlacement, actor_units

# offer_weights runs in its own thread beside generate (async.partial_rollouts); every other call keeps the
# default group's one-at-a-time order.
WEIGHTS_GROUP = "weights"
RolloutActor = ray.remote(concurrency_groups={WEIGHTS_GROUP: 1})(RolloutWorker)  # type: ignore[call-overload]
ScoringActor = ray.remote(ScoringWorker)
TrainerActor = ray.remote(TrainerWorker)
ReferenceActor = ray.remote(ReferenceWorker)
CriticActor = ray.remote(CriticWorker)
ColocatedActor = ray.remote(ColocatedWorker)
SINGLE_ACTORS: dict[str, Any] = {
    "rollout": RolloutActor,
    "scorer": ScoringActor,
    "trainer": TrainerActor,
    "reference": ReferenceActor,
    "critic": CriticActor,
}
# Roles whose process Ray may restart: they hold no state a step changes (the critic and the trainer do).
RESTARTABLE = {"scorer", "reference"}


@dataclass
class ActorSet:
    """Handles of the loop's actors. ``names[i]`` labels ``all[i]`` in records. ``reference`` and
    ``critic`` are None unless the run needs them; a colocated handle appears under each role it holds
    (``scorers[0] is reference`` with ``colocate: [[reference, scorer]]``) but once in ``all``."""

    rollout: Any
    scorers: list[Any]
    trainer: Any
    group: Any
    names: list[str] = field(default_factory=list)
    info: list[dict[str, Any]] = field(default_factory=list)
    reference: Any = None
    critic: Any = None
    handles: list[Any] = field(default_factory=list)  # one per process; empty: the three roles' handles
    borrowed: list[Any] = field(default_factory=list)  # in ``all`` but another session's: never closed here

    @property
    def all(self) -> list[Any]:
        return list(self.handles) or [self.rollout, *self.scorers, self.trainer]

    def name_of(self, handle: Any) -> str:
        return self.names[self.all.index(handle)]

    def close(self, timeout_s: float = 30.0) -> None:
        """Let each worker release its engine (vLLM child processes), then kill the actors (but the borrowed)."""
        own = [a for a in self.all if not any(a is b for b in self.borrowed)]
        try:
            ray.get([a.close.remote() for a in own], timeout=timeout_s)
        except Exception:  # noqa: BLE001  (a dead actor has nothing left to close)
            pass
        kill_quietly(own)
        try:
            remove_placement_group(self.group)
        except Exception:  # noqa: BLE001
            pass


def kill_quietly(actors: list[Any]) -> None:
    """``ray.kill`` each actor, going on past any that raises.

    Best effort: after Ctrl-C or a lost cluster a kill raises too, and must neither hide the cause
    nor leave the remaining actors (and Ray itself) running.
    """
    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # noqa: BLE001  (already dead, or the cluster is gone)
            pass


def _bundle(p: ResolvedPlacement) -> dict[str, float]:
    return {"CPU": p.num_cpus, **({"GPU": p.gpu} if p.gpu > 0 else {})}


def _check_fits(bundles: list[dict[str, float]]) -> None:
    have = ray.cluster_resources()
    for key in ("CPU", "GPU"):
        need = sum(b.get(key, 0.0) for b in bundles)
        if need > have.get(key, 0.0) + 1e-9:
            raise RlsimError(
                f"the actors ask Ray for {need:g} {key} in all but the cluster has {have.get(key, 0):g}; lower "
                f"placement.*.{'num_cpus' if key == 'CPU' else 'gpu'}, reward.replicas, or add nodes"
            )


def create_actors(
    placements: dict[str, ResolvedPlacement],
    makers: dict[str, Callable[[], Any]],
    replicas: int,
    strategy: str,
    ready_timeout_s: float,
    start_timeout_s: float,
    scorer_restarts: int = 2,
    colocate: list[list[str]] | None = None,
    rollout: Any = None,
) -> ActorSet:
    """Reserve a placement group, start one actor per unit (``rlsim.placement.actor_units``: rollout,
    ``replicas`` scorers, trainer, plus the reference and the critic where ``placements`` has them,
    colocated roles merged); wait until all are up. ``rollout``: a running rollout actor (another session's,
    not colocated with any role here) used instead of starting one; it stays its owner's to close."""
    units = actor_units(placements, replicas, colocate or [])
    if rollout is not None:
        if units[0].roles != ("rollout",):
            raise RlsimError("a borrowed rollout actor cannot be colocated with other roles: drop it from colocate")
        units = units[1:]
    bundles = [_bundle(u.placement) for u in units]
    _check_fits(bundles)
    group = placement_group(bundles, strategy=strategy)
    try:
        ray.get(group.ready(), timeout=ready_timeout_s)
    except ray.exceptions.GetTimeoutError:
        remove_placement_group(group)
        raise RlsimError(
            f"Ray could not place {len(bundles)} actors with strategy {strategy} within {ready_timeout_s:g} s "
            f"(cluster: {ray.cluster_resources()}); use PACK/SPREAD instead of a STRICT_ strategy, lower "
            "placement.*.num_cpus, or add nodes"
        ) from None
    handles = [_start(u, i, group, makers, scorer_restarts) for i, u in enumerate(units)]
    by_member = {member: h for u, h in zip(units, handles, strict=True) for _, member in u.members}
    names = [u.name for u in units]
    if rollout is not None:
        by_member["rollout"], handles, names = rollout, [rollout, *handles], ["rollout", *names]
    actors = ActorSet(
        by_member["rollout"],
        [by_member[f"scorer-{i}"] for i in range(replicas)],
        by_member["trainer"],
        group,
        names,
        reference=by_member.get("reference"),
        critic=by_member.get("critic"),
        handles=handles,
        borrowed=[rollout] if rollout is not None else [],
    )
    actors.info = _wait_started(actors, start_timeout_s)
    return actors


def _start(unit: ActorUnit, index: int, group: Any, makers: dict[str, Callable[[], Any]], restarts: int) -> Any:
    p = unit.placement
    options: dict[str, Any] = dict(
        num_cpus=p.num_cpus,
        num_gpus=p.gpu,
        scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
        runtime_env={"env_vars": {"OMP_NUM_THREADS": str(p.threads), "MKL_NUM_THREADS": str(p.threads)}},
    )
    if set(unit.roles) <= RESTARTABLE:  # a dead scorer/reference is restarted and its batches re-sent by the driver
        options["max_restarts"] = restarts
    if len(unit.members) == 1:
        return SINGLE_ACTORS[unit.roles[0]].options(**options).remote(unit.name, p, makers[unit.roles[0]])
    members = {role: (name, makers[role]) for role, name in unit.members}
    return ColocatedActor.options(**options).remote(unit.name, p, members)


def _wait_started(actors: ActorSet, timeout_s: float) -> list[dict[str, Any]]:
    t0 = time.perf_counter()
    refs = [a.ready.remote() for a in actors.all]
    try:
        return ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        actors.close(timeout_s=5)
        raise RlsimError(
            f"the loop's actors did not start within {timeout_s:g} s; raise ray.start_timeout_s on a slow "
            "or busy machine (vLLM's engine start alone takes about 35 s on 2 cores)"
        ) from None
    except ray.exceptions.RayActorError as err:
        actors.close(timeout_s=5)
        raise RlsimError(f"an actor failed to start after {time.perf_counter() - t0:.0f} s: {_cause(err)}") from None


def _cause(err: BaseException) -> str:
    """The most useful line of a Ray error: the worker's own exception message if there is one."""
    text = str(err)
    for marker in ("RlsimError: ", "Error: "):
        if marker in text:
            return text.rsplit(marker, 1)[1].strip().splitlines()[0]
    return text.strip().splitlines()[-1] if text.strip() else type(err).__name__
