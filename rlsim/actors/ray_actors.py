"""The loop's workers as Ray actors in one placement group: one bundle per actor, in config order.

Ray's CPU counts here are bookkeeping (what the placement group reserves); the workers pin their own
processes to their cores. Creation never hangs: the placement group and the actors' start (which
includes vLLM's engine start) each wait at most their configured timeout, then say what to change.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rlsim.actors.workers import RolloutWorker, ScoringWorker, TrainerWorker
from rlsim.errors import RlsimError
from rlsim.placement import ResolvedPlacement

RolloutActor = ray.remote(RolloutWorker)
ScoringActor = ray.remote(ScoringWorker)
TrainerActor = ray.remote(TrainerWorker)


@dataclass
class ActorSet:
    """Handles of the loop's actors. ``names[i]`` labels ``all[i]`` in records."""

    rollout: Any
    scorers: list[Any]
    trainer: Any
    group: Any
    names: list[str] = field(default_factory=list)
    info: list[dict[str, Any]] = field(default_factory=list)

    @property
    def all(self) -> list[Any]:
        return [self.rollout, *self.scorers, self.trainer]

    def close(self, timeout_s: float = 30.0) -> None:
        """Let each worker release its engine (vLLM child processes), then kill the actors."""
        try:
            ray.get([a.close.remote() for a in self.all], timeout=timeout_s)
        except Exception:  # noqa: BLE001  (a dead actor has nothing left to close)
            pass
        kill_quietly(self.all)
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
) -> ActorSet:
    """Reserve a placement group, start rollout, ``replicas`` scorers and the trainer; wait until all are up."""
    roles = ["rollout"] + ["scorer"] * replicas + ["trainer"]
    bundles = [_bundle(placements[r]) for r in roles]
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
    names = ["rollout"] + [f"scorer-{i}" for i in range(replicas)] + ["trainer"]
    classes: dict[str, Any] = {"rollout": RolloutActor, "scorer": ScoringActor, "trainer": TrainerActor}
    handles = []
    for i, (role, name) in enumerate(zip(roles, names, strict=True)):
        p = placements[role]
        options: dict[str, Any] = dict(
            num_cpus=p.num_cpus,
            num_gpus=p.gpu,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
            runtime_env={"env_vars": {"OMP_NUM_THREADS": str(p.threads), "MKL_NUM_THREADS": str(p.threads)}},
        )
        if role == "scorer":  # a dead scorer is restarted and its batches re-submitted by the driver
            options["max_restarts"] = scorer_restarts
        handles.append(classes[role].options(**options).remote(name, p, makers[role]))
    actors = ActorSet(handles[0], handles[1:-1], handles[-1], group, names)
    actors.info = _wait_started(actors, start_timeout_s)
    return actors


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
