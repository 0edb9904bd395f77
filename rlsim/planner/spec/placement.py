"""From a placement's knobs to concrete resources: engines, scorer replicas and their units per node.

Units are cores for a ``cpu`` model and GPUs for a ``cuda`` one. Every impossible placement (a CUDA
runtime on a cluster with no GPUs, more replicas than cores, a scoring share that leaves generation
nothing, ...) raises ``PlacementError`` with the reason and the fix, before anything is simulated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlsim.errors import RlsimError
from rlsim.planner.profile.scaling import RewardFunctionModel
from rlsim.planner.profile.schema import Device, GenerationModel, Profile, ScorerLatencyModel
from rlsim.planner.spec.cluster import NodeSpec, PlacementSpec


class PlacementError(RlsimError):
    """A placement that cannot exist on the cluster; the message says why and what to change."""


@dataclass(frozen=True)
class Resources:
    """What one placement uses. Per-node counts are the same on every used node.

    ``shared``: scorers run on the generation engines' units (colocated), so they slow each other
    down while both run. ``train_units``: units the update runs on (the generation units, as in a
    hybrid engine that trains where it generates, unless ``train_on_scoring``, or ``train_nodes`` nodes
    of their own: split pools). ``nodes`` counts the generation nodes only. ``tp`` x ``pp``: the GPUs of
    one engine.
    """

    nodes: int
    gen_device: Device
    engines_per_node: int
    engine_units: float
    max_running: int
    scorer_device: Device
    replicas_per_node: int
    replica_units: float
    scoring_units_per_node: float
    shared: bool
    gpus_per_node: int
    cores_per_node: int
    train_on_scoring: bool = False
    tp: int = 1
    pp: int = 1
    train_nodes: int = 0

    @property
    def train_node_count(self) -> int:
        """Nodes the data-parallel trainer spans (its all-reduce crosses the network when > 1)."""
        return self.train_nodes or self.nodes

    @property
    def engines(self) -> int:
        return self.nodes * self.engines_per_node

    @property
    def replicas(self) -> int:
        return self.nodes * self.replicas_per_node

    @property
    def gen_units(self) -> float:
        return self.engines * self.engine_units

    @property
    def scoring_units(self) -> float:
        return self.nodes * self.scoring_units_per_node

    @property
    def train_units(self) -> float:
        if self.train_nodes:
            return float(self.train_nodes * self.gpus_per_node)
        return self.scoring_units if self.train_on_scoring else self.gen_units

    def units_used(self) -> dict[str, float]:
        """GPUs and cores the plan occupies (shared units counted once); whole nodes in ``nodes``."""
        used = {"cpu": 0.0, "cuda": 0.0}
        used[self.gen_device] += self.gen_units
        if not (self.shared and self.scorer_device == self.gen_device):
            used[self.scorer_device] += self.scoring_units
        used["cuda"] += self.train_nodes * self.gpus_per_node
        return {"nodes": float(self.nodes + self.train_nodes), "gpus": used["cuda"], "cores": used["cpu"]}


def node_units(node: NodeSpec, device: Device) -> int:
    return node.gpus if device == "cuda" else node.cores


def check_devices(
    node: NodeSpec, profile: Profile, runtime: str
) -> tuple[GenerationModel, ScorerLatencyModel | RewardFunctionModel]:
    """The profile's generation and reward models, or an error if the cluster lacks their device."""
    profile.require_sections()
    gen = profile.generation
    assert gen is not None
    scorer = profile.reward(runtime)
    for what, device in (("generation", gen.device), (f"runtime {runtime!r}", scorer.device)):
        if device == "cuda" and node.gpus == 0:
            raise PlacementError(
                f"the cluster's nodes have no GPUs but {what} is a CUDA model in the {profile.hardware_kind} "
                "profile; set nodes.gpus, or pick a profile/runtime measured on CPU"
            )
    return gen, scorer


def resolve(node: NodeSpec, profile: Profile, spec: PlacementSpec) -> Resources:
    """Concrete resources of ``spec`` on ``node`` x ``spec.nodes``; raises ``PlacementError``."""
    gen, scorer = check_devices(node, profile, spec.runtime)
    total_nodes = spec.nodes or node.count
    if total_nodes > node.count:
        raise PlacementError(
            f"placement asks for {total_nodes} nodes but the cluster has {node.count}; "
            "lower placement.nodes or add nodes"
        )
    _check_pools(node, gen, spec, total_nodes)
    nodes = total_nodes - spec.train_nodes
    gen_total = node_units(node, gen.device)
    score_total = node_units(node, scorer.device)
    host_cores = gen.host_cores_per_unit * node.gpus if gen.device == "cuda" else 0.0
    if spec.colocated:
        scoring_units = float(score_total)
        gen_units = float(gen_total)
    else:
        available = score_total - (host_cores if scorer.device == "cpu" else 0.0)
        scoring_units = float(math.floor(spec.scoring_share * available + 1e-9))
        if scoring_units < 1:
            raise PlacementError(
                f"scoring share {spec.scoring_share:g} of {available:g} free {_unit_name(scorer.device)} per "
                f"node leaves scoring less than one; raise scoring_share or use colocated placement"
            )
        gen_units = float(gen_total - (scoring_units if scorer.device == gen.device else 0.0))
    if gen_units <= 0:
        raise PlacementError(
            f"scoring share {spec.scoring_share:g} takes every {_unit_name(gen.device)[:-1]} of a node and "
            "leaves generation none; lower scoring_share"
        )
    engine_units = _engine_units(spec, gen, gen_units)
    engines = int(math.floor(gen_units / engine_units + 1e-9))
    if engines < 1:
        raise PlacementError(
            f"generation gets {gen_units:g} {_unit_name(gen.device)} per node, fewer than one engine needs "
            f"({engine_units:g}); lower scoring_share or engine_units"
        )
    replica_units = scoring_units / spec.replicas_per_node
    if scorer.device == "cpu" and replica_units < 1 and not isinstance(scorer, RewardFunctionModel):
        raise PlacementError(
            f"{spec.replicas_per_node} scorer replicas per node on {scoring_units:g} cores leaves a replica "
            "less than one core; use fewer replicas_per_node or a larger scoring_share"
        )
    max_running = spec.max_running or max(1, int(gen.max_running * engine_units / gen.units))
    return Resources(
        nodes=nodes,
        gen_device=gen.device,
        engines_per_node=engines,
        engine_units=engine_units,
        max_running=max_running,
        scorer_device=scorer.device,
        replicas_per_node=spec.replicas_per_node,
        replica_units=replica_units,
        scoring_units_per_node=scoring_units,
        shared=spec.colocated,
        gpus_per_node=node.gpus,
        cores_per_node=node.cores,
        train_on_scoring=spec.train_on == "scoring",
        tp=spec.tp,
        pp=spec.pp,
        train_nodes=spec.train_nodes,
    )


def _check_pools(node: NodeSpec, gen: GenerationModel, spec: PlacementSpec, total_nodes: int) -> None:
    """Multi-GPU engines need the profile's scaling and must fit a node; split pools need nodes left."""
    if spec.tp * spec.pp > 1:
        if gen.device != "cuda" or gen.parallel is None:
            raise PlacementError(
                f"tp {spec.tp} x pp {spec.pp} needs a GPU profile with generation.parallel "
                "(tensor/pipeline scaling); use tp = pp = 1 or such a profile"
            )
        if spec.tp not in gen.parallel.tp_speedup:
            have = ", ".join(str(t) for t in sorted(gen.parallel.tp_speedup))
            raise PlacementError(
                f"the profile gives no tensor-parallel speed-up for tp {spec.tp} (it has: {have}); "
                "pick one of those or add it to generation.parallel.tp_speedup"
            )
        if spec.pp > gen.parallel.max_pp:
            raise PlacementError(f"pp {spec.pp} exceeds the profile's max_pp {gen.parallel.max_pp}")
        if spec.tp * spec.pp > node.gpus:
            raise PlacementError(
                f"an engine of tp {spec.tp} x pp {spec.pp} GPUs does not fit a node of "
                f"{node.gpus} GPUs (engines spanning nodes are not modelled); lower tp or pp"
            )
    if spec.train_nodes:
        if node.gpus == 0:
            raise PlacementError("train_nodes (split GPU pools) needs GPU nodes; set train_nodes: 0")
        if spec.train_nodes >= total_nodes:
            raise PlacementError(
                f"train_nodes {spec.train_nodes} leaves no generation node of {total_nodes}; "
                "lower train_nodes or raise nodes"
            )


def _engine_units(spec: PlacementSpec, gen: GenerationModel, gen_units: float) -> float:
    """Units per engine: as asked; else the profile's on GPUs, or one engine per CPU node's cores."""
    if spec.tp * spec.pp > 1:
        return float(spec.tp * spec.pp)
    if spec.engine_units is not None:
        return spec.engine_units
    if gen.device == "cuda":
        return gen.units
    return gen_units


def _unit_name(device: Device) -> str:
    return "GPUs" if device == "cuda" else "cores"
