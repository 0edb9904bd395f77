"""Multi-GPU engines (tensor and pipeline parallel), the data-parallel trainer and split GPU pools,
each against a case worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.planner.profile.scaling import DataParallel, ParallelScaling
from rlsim.planner.profile.schema import GenerationModel, TrainerModel
from rlsim.planner.sim.evaluate import evaluate
from rlsim.planner.sim.generation import completion_work_s, deal
from rlsim.planner.spec.cluster import NodeSpec
from rlsim.planner.spec.placement import PlacementError, resolve
from tests.helpers.planner_cases import EXACT, fixed_workload, make_profile, placement

SCALING = ParallelScaling(tp_speedup={1: 1.0, 2: 1.6, 4: 2.5}, tp_comm_s={2: 0.002, 4: 0.004}, pp_hop_s=0.001, max_pp=4)


def gpu_model(**kw: object) -> GenerationModel:
    return GenerationModel(
        device="cuda", units=1, base_s=0.02, per_seq_s=0.001, max_running=256, fit=EXACT, parallel=SCALING, **kw
    )  # type: ignore[arg-type]


def one_engine_work(model: GenerationModel, n: int, tokens: int, tp: int, pp: int) -> float:
    """Makespan of ``n`` sequences of ``tokens`` each, all admitted at once, on one tp x pp engine."""
    responses = np.full(n, tokens)
    batch = deal(np.zeros(n, dtype=np.int64), responses, 1)
    return float(completion_work_s(batch, model, tp * pp, 256, tp, pp).max())


def test_tensor_parallel_iteration_by_hand() -> None:
    # 16 sequences x 10 tokens on TP 4: each iteration (0.02 + 0.001 x 16) / 2.5 + 0.004 = 0.0184 s.
    assert one_engine_work(gpu_model(), 16, 10, tp=4, pp=1) == pytest.approx(10 * 0.0184)
    # TP 2: (0.036) / 1.6 + 0.002 = 0.0245 s per iteration.
    assert one_engine_work(gpu_model(), 16, 10, tp=2, pp=1) == pytest.approx(10 * 0.0245)


def test_pipeline_parallel_iteration_by_hand() -> None:
    # PP 4 with 16 sequences: 4 micro-batches of 4 in flight; a round trip costs 0.02 + 0.001 x 16 / 4
    # plus 3 stage hops of 1 ms = 0.027 s per token of every sequence.
    assert one_engine_work(gpu_model(), 16, 10, tp=1, pp=4) == pytest.approx(10 * 0.027)
    # Two sequences on four stages: only 2 micro-batches, so bubbles: 0.02 + 0.001 x 2 / 2 + 0.003 = 0.024.
    assert one_engine_work(gpu_model(), 2, 10, tp=1, pp=4) == pytest.approx(10 * 0.024)


def test_tp_and_pp_combine() -> None:
    # TP 2 x PP 2, 8 sequences: (0.02 + 0.001 x 8 / 2) / 1.6 + 0.002 + 0.001 = 0.018 s per iteration.
    assert one_engine_work(gpu_model(), 8, 5, tp=2, pp=2) == pytest.approx(5 * 0.018)


def test_a_degree_the_profile_lacks_is_refused() -> None:
    profile = make_profile(device="cuda")
    profile = profile.model_copy(update={"generation": gpu_model()})
    node = NodeSpec(count=1, cores=16, gpus=8, kind="test-kind")
    with pytest.raises(PlacementError, match="no tensor-parallel speed-up for tp 8"):
        resolve(node, profile, placement(runtime="const", tp=8))
    with pytest.raises(PlacementError, match="does not fit a node"):
        resolve(NodeSpec(count=1, cores=16, gpus=4, kind="test-kind"), profile, placement(tp=4, pp=2))
    res = resolve(node, profile, placement(tp=2, pp=2, colocated=True))
    assert (res.engine_units, res.engines_per_node) == (4.0, 2)


def test_ring_allreduce_by_hand() -> None:
    dp = DataParallel(grad_bytes=16e9, intra_node_gbps=200, inter_node_gbps=25, overlap=0.5, optimizer_steps=2)
    # 8 GPUs in one node: 2 x 7/8 x 16 GB / 200 GB/s = 0.14 s, half hidden, twice per step = 0.14 s.
    assert dp.allreduce_s(8, 1) == pytest.approx(0.14)
    # 16 GPUs over 2 nodes: 2 x 15/16 x 16 / 25 = 1.2 s, x 0.5 x 2 = 1.2 s.
    assert dp.allreduce_s(16, 2) == pytest.approx(1.2)
    assert dp.allreduce_s(1, 1) == 0.0


def _gpu_profile():
    dp = DataParallel(grad_bytes=1e9, intra_node_gbps=100, inter_node_gbps=10, split_sync_s=1.5)
    trainer = TrainerModel(units=1, update_fixed_s=0.0, update_s_per_token=0.01, sync_fixed_s=0.25, data_parallel=dp)
    return make_profile(device="cuda").model_copy(update={"generation": gpu_model(), "trainer": trainer})


def test_split_pools_train_on_their_own_nodes() -> None:
    """4 nodes x 2 GPUs, 1 of them a training node: 3 generation nodes, trainer on 2 GPUs of one node."""
    node = NodeSpec(count=4, cores=8, gpus=2, kind="test-kind")
    workload = fixed_workload(prompts=6, group=4, response=10)  # 24 rollouts x 10 tokens = 240 tokens
    spec = placement(runtime="const", colocated=True, train_nodes=1)
    ev = evaluate(node, _gpu_profile(), workload, spec, steps=1, noise=False)
    res = ev.resources
    assert (res.nodes, res.engines, res.train_units) == (3, 6, 2.0)
    assert res.units_used()["gpus"] == 8.0 and res.units_used()["nodes"] == 4.0
    # update: 240 x 0.01 on 1 unit / 2 units = 1.2 s, + all-reduce in one node 2 x 1/2 x 1 GB / 100 GB/s = 0.01.
    assert ev.time_s["update"] == pytest.approx(1.21)
    assert ev.time_s["sync"] == pytest.approx(1.5)  # split pools: the profile's network weight sync
    colocated = evaluate(node, _gpu_profile(), workload, placement(runtime="const", colocated=True), 1, noise=False)
    # Colocated: 8 GPUs over 4 nodes train; all-reduce crosses nodes: 2 x 7/8 x 1 GB / 10 GB/s = 0.175 s.
    assert colocated.time_s["update"] == pytest.approx(240 * 0.01 / 8 + 0.175)
    assert colocated.time_s["sync"] == pytest.approx(0.25)
