"""Resources per placement, and one clear message for each impossible placement."""

from __future__ import annotations

import pytest

from rlsim.planner.profile.examples import gpu_profile
from rlsim.planner.search.grid import candidates, enumerate_placements
from rlsim.planner.spec.cluster import BatcherSpec, NodeSpec, PlacementSpec, SearchSpec
from rlsim.planner.spec.placement import PlacementError, resolve

FIXED = BatcherSpec(kind="fixed", batch_size=32)
GPU_NODE = NodeSpec(count=4, cores=64, gpus=8, kind="gpu-8x-illustrative")


def _spec(**kw: object) -> PlacementSpec:
    return PlacementSpec(batcher=FIXED, **{"runtime": "compile@cuda", **kw})  # type: ignore[arg-type]


def test_split_gpu_scoring_takes_gpus_from_generation() -> None:
    res = resolve(GPU_NODE, gpu_profile(), _spec(scoring_share=0.25, replicas_per_node=2))
    assert (res.engines_per_node, res.scoring_units_per_node, res.replica_units) == (6, 2, 1)
    assert res.units_used() == {"nodes": 4, "gpus": 32, "cores": 0}


def test_cpu_scoring_on_a_gpu_node_uses_the_host_cores_left_by_generation() -> None:
    # 8 GPUs x 2 host cores each leave 48 of 64 cores; a quarter of those score.
    res = resolve(GPU_NODE, gpu_profile(), _spec(runtime="native@cpu", scoring_share=0.25, replicas_per_node=3))
    assert (res.engines_per_node, res.scoring_units_per_node, res.replica_units) == (8, 12, 4)


def test_colocated_shares_every_unit() -> None:
    res = resolve(GPU_NODE, gpu_profile(), _spec(colocated=True))
    assert res.shared and res.engines_per_node == 8 and res.scoring_units_per_node == 8
    assert res.units_used()["gpus"] == 32


@pytest.mark.parametrize(
    "node, spec, message",
    [
        (NodeSpec(count=1, cores=64, gpus=0, kind="k"), _spec(), "no GPUs but generation is a CUDA model"),
        (GPU_NODE, _spec(scoring_share=0.05), "leaves scoring less than one"),
        (GPU_NODE, _spec(scoring_share=1.0), "leaves generation none"),
        (GPU_NODE, _spec(runtime="native@cpu", scoring_share=0.02, replicas_per_node=1), "less than one"),
        (GPU_NODE, _spec(runtime="native@cpu", scoring_share=0.1, replicas_per_node=8), "less than one core"),
        (GPU_NODE, _spec(nodes=5), "asks for 5 nodes but the cluster has 4"),
        (GPU_NODE, _spec(engine_units=16), "fewer than one engine needs"),
    ],
)
def test_impossible_placements_say_why(node: NodeSpec, spec: PlacementSpec, message: str) -> None:
    with pytest.raises(PlacementError, match=message):
        resolve(node, gpu_profile(), spec)


def test_cuda_runtime_without_gpus_is_named() -> None:
    from tests.helpers.planner_cases import make_profile

    node = NodeSpec(count=1, cores=8, gpus=0, kind="test-kind")
    profile = make_profile()
    cuda_scorer = profile.runtimes["const"].model_copy(update={"device": "cuda"})
    profile = profile.model_copy(update={"runtimes": {"const": cuda_scorer}})
    with pytest.raises(PlacementError, match="no GPUs but runtime 'const' is a CUDA model"):
        resolve(node, profile, PlacementSpec(runtime="const", batcher=FIXED))


def test_grid_skips_duplicate_colocated_shares_and_rejects_with_reasons() -> None:
    search = SearchSpec(
        runtimes=["compile@cuda"], batchers=[FIXED], scoring_shares=[0.05, 0.25, 0.5], colocated=[False, True]
    )
    specs = enumerate_placements(search)
    assert len(specs) == 4  # three split shares + one colocated (its share is meaningless)
    found = candidates(GPU_NODE, gpu_profile(), search)
    assert len(found.feasible) == 3
    assert [reason for _, reason in found.rejected] and "less than one" in found.rejected[0][1]
