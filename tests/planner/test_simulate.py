"""Whole steps with answers worked out by hand, determinism, and bottleneck naming."""

from __future__ import annotations

import pytest

from rlsim.planner.sim.evaluate import evaluate
from rlsim.planner.spec.cluster import BatcherSpec, NodeSpec, PlacementSpec
from rlsim.planner.spec.workload import Workload
from rlsim.workloads import FixedLengths, LognormalLengths
from tests.helpers.planner_cases import fixed_workload, make_profile, placement


def test_sequential_step_by_hand(two_core_node: NodeSpec) -> None:
    # One engine, one sequence at a time (max_running=1), 10 tokens x 0.1 s: rollouts finish at
    # 1, 2, 3, 4 s. Sequential: scoring starts at 4 s, two batches of 2 x 0.5 s -> rewards at 5 s.
    # Update 0.3 + sync 0.2 -> 5.5 s.
    ev = evaluate(two_core_node, make_profile(max_running=1), fixed_workload(), placement("sequential"), steps=1)
    t = ev.time_s
    assert t["generate"] == pytest.approx(4.0)
    assert t["score"] == t["score_tail"] == pytest.approx(1.0)
    assert (t["update"], t["sync"]) == (pytest.approx(0.3), pytest.approx(0.2))
    assert t["total"] == pytest.approx(5.5)
    assert ev.rollouts_per_hour == pytest.approx(4 * 3600 / 5.5)


def test_overlapped_step_by_hand(two_core_node: NodeSpec) -> None:
    # Same, overlapped: batch (1, 2) is full at 2 s and scored 2.0-2.5; batch (3, 4) at 4 s, done
    # 4.5. Only 0.5 s of scoring is left on the critical path: 4.5 + 0.5 = 5.0 s.
    ev = evaluate(two_core_node, make_profile(max_running=1), fixed_workload(), placement("overlapped"), steps=1)
    assert ev.time_s["generate"] == pytest.approx(4.0)
    assert ev.time_s["score_tail"] == pytest.approx(0.5)
    assert ev.time_s["score"] == pytest.approx(1.0)  # as the loop counts it: scorers busy 2-2.5 and 4-4.5
    assert ev.time_s["total"] == pytest.approx(5.0)


def test_continuous_batching_iteration_time_by_hand(two_core_node: NodeSpec) -> None:
    # Four sequences of 10 tokens run together: iteration = 0.1 + 0.05 x 4 = 0.3 s, all finish at
    # 3.0 s; then two batches of 0.5 s -> 4.0; + 0.5 -> 4.5 s.
    profile = make_profile(step_s=0.1, per_seq_s=0.05)
    ev = evaluate(two_core_node, profile, fixed_workload(), placement("sequential"), steps=1)
    assert ev.time_s["generate"] == pytest.approx(3.0)
    assert ev.time_s["total"] == pytest.approx(4.5)


def test_colocated_contention_fixed_point_by_hand() -> None:
    # One core shared by the engine and the scorer (so timings match the split case's core each).
    # Colocated, overlapped, slowdowns 1.0 both ways (half speed while the other runs).
    # Batch 1 is released at 2.0 and scored at half speed while generation runs: 2.0-3.0.
    # Generation at half speed during 2.0-3.0 loses 0.5 s: rollouts 3, 4 finish at 3.5, 4.5.
    # Batch 2 at 4.5, generation done, full speed: 4.5-5.0. Step = 5.0 + 0.5 = 5.5 s.
    profile = make_profile(max_running=1, gen_slowdown=1.0, score_slowdown=1.0)
    one_core = NodeSpec(count=1, cores=1, gpus=0, kind="test-kind")
    ev = evaluate(one_core, profile, fixed_workload(), placement("overlapped", colocated=True), steps=1)
    assert ev.time_s["generate"] == pytest.approx(4.5)
    assert ev.time_s["score_tail"] == pytest.approx(0.5)
    assert ev.time_s["score"] == pytest.approx(1.5)  # busy 2.0-3.0 and 4.5-5.0
    assert ev.time_s["total"] == pytest.approx(5.5)
    assert ev.steps[0].rounds >= 2  # the fixed point needed more than the uncontended pass


def test_colocated_sequential_has_no_contention() -> None:
    # Sequential never runs both at once, so slowdowns must not matter: same as the split case.
    profile = make_profile(max_running=1, gen_slowdown=1.0, score_slowdown=1.0)
    one_core = NodeSpec(count=1, cores=1, gpus=0, kind="test-kind")
    ev = evaluate(one_core, profile, fixed_workload(), placement("sequential", colocated=True), steps=1)
    assert ev.time_s["total"] == pytest.approx(5.5)


def _lognormal_workload() -> Workload:
    return Workload(
        prompts_per_step=16,
        group_size=4,
        prompt_tokens=FixedLengths(tokens=32),
        response_tokens=LognormalLengths(mean=100, sigma=0.8, min=4, max=600),
    )


def test_same_seed_same_result_and_other_seed_differs() -> None:
    node = NodeSpec(count=4, cores=8, gpus=0, kind="test-kind")
    profile = make_profile(per_seq_s=0.001)
    spec = PlacementSpec(
        runtime="linear",
        batcher=BatcherSpec(kind="dynamic", batch_size=8, max_wait_s=0.1),
        colocated=True,
        schedule="overlapped",
        replicas_per_node=2,
    )
    a = evaluate(node, profile, _lognormal_workload(), spec, steps=3, seed=7)
    b = evaluate(node, profile, _lognormal_workload(), spec, steps=3, seed=7)
    c = evaluate(node, profile, _lognormal_workload(), spec, steps=3, seed=8)
    assert a.as_dict() == b.as_dict()
    assert a.step_time_s != c.step_time_s


def test_bottleneck_generation_vs_scoring(two_core_node: NodeSpec) -> None:
    slow_gen = evaluate(
        two_core_node, make_profile(step_s=1.0, score_s=0.01), fixed_workload(), placement("sequential"), steps=1
    )
    assert slow_gen.bottleneck == "generation"
    slow_score = evaluate(
        two_core_node, make_profile(step_s=0.001, score_s=5.0), fixed_workload(), placement("sequential"), steps=1
    )
    assert slow_score.bottleneck == "scoring"
    assert "replicas" in slow_score.bottleneck_detail


def test_stragglers_named_when_one_engine_lags() -> None:
    node = NodeSpec(count=1, cores=8, gpus=0, kind="test-kind")
    workload = Workload(
        prompts_per_step=64,
        group_size=1,
        prompt_tokens=FixedLengths(tokens=8),
        response_tokens=LognormalLengths(mean=50, sigma=1.2, min=1, max=5000),
    )
    spec = PlacementSpec(
        runtime="const",
        batcher=BatcherSpec(kind="fixed", batch_size=64),
        colocated=False,
        scoring_share=0.125,
        engine_units=1,
        schedule="overlapped",
    )
    ev = evaluate(node, make_profile(score_s=0.001), workload, spec, steps=2)
    assert ev.bottleneck == "generation"
    assert "stragglers" in ev.bottleneck_detail


def test_utilisation_by_hand(two_core_node: NodeSpec) -> None:
    # Sequential hand case: engine busy 4.0 of 5.5 s; scorer busy 1.0 of 5.5 s; training 0.5 of 5.5.
    ev = evaluate(two_core_node, make_profile(max_running=1), fixed_workload(), placement("sequential"), steps=1)
    assert ev.utilisation["generation"] == pytest.approx(4.0 / 5.5)
    assert ev.utilisation["scoring"] == pytest.approx(1.0 / 5.5)
    assert ev.utilisation["training"] == pytest.approx(0.5 / 5.5)


def test_predict_step_maps_loop_knobs_onto_the_hand_case() -> None:
    from rlsim.planner.validate.predict import LoopKnobs, predict_step

    knobs = LoopKnobs(
        prompts_per_step=1,
        group_size=4,
        prompt_tokens=FixedLengths(tokens=5),
        response_tokens=FixedLengths(tokens=10),
        schedule="overlapped",
        placement="split",
        cores=2,
        scoring_cores=1,
        runtime="const",
        batcher=BatcherSpec(kind="fixed", batch_size=2),
        micro_batch=2,
        max_num_seqs=1,
        steps=2,
    )
    # As test_overlapped_step_by_hand: one core generates, one scores; micro-batches of 2 reach the
    # scorer at 2 and 4 s -> 5.0 s.
    assert predict_step(knobs, make_profile(step_s=0.1)).step_time_s == pytest.approx(5.0)
    shared = knobs.model_copy(update={"placement": "shared", "cores": 1, "scoring_cores": None})
    assert predict_step(shared, make_profile(gen_slowdown=1.0, score_slowdown=1.0)).step_time_s == pytest.approx(5.5)


def test_round_robin_dispatch_waits_for_whole_micro_batches(two_core_node: NodeSpec) -> None:
    # The loop's dispatch with micro-batches of 4: one call released at 4 s, two batches of 0.5 s
    # -> rewards at 5.0, step 5.5 s (the pull model scores the first pair at 2 s and ends at 5.0).
    spec = placement("overlapped", dispatch="round_robin", batcher_window=4)
    ev = evaluate(two_core_node, make_profile(max_running=1), fixed_workload(), spec, steps=1)
    assert ev.time_s["score"] == pytest.approx(1.0)
    assert ev.time_s["total"] == pytest.approx(5.5)


def test_knobs_from_the_loops_default_config() -> None:
    from pathlib import Path

    from rlsim.config_loader import load_config
    from rlsim.loop.config import RunConfig
    from rlsim.planner.profile.examples import cpu_profile
    from rlsim.planner.validate.predict import knobs_from_run_config, predict_step

    # load_config skips the loop's check that cores 0-2 exist here: the planner only reads the knobs.
    config = load_config(
        RunConfig,
        Path(__file__).resolve().parents[2] / "configs" / "default.yaml",
        ["placement.preset=split", "placement.pool=[0, 1, 2]"],
    )
    knobs = knobs_from_run_config(config)
    assert (knobs.prompts_per_step, knobs.group_size, knobs.schedule) == (8, 4, "overlapped")
    assert knobs.response_tokens == LognormalLengths(mean=64, sigma=0.6, min=16, max=192)
    assert (knobs.cores, knobs.scoring_cores) == (3, 1)  # split: rollout gets the first half, rounded up
    assert (knobs.runtime, knobs.batcher.kind, knobs.batcher.window, knobs.max_length) == ("native", "sorted", 8, 256)
    ev = predict_step(config, cpu_profile())
    assert ev.resources.train_on_scoring and ev.resources.replica_units == 1
    assert len(ev.steps) == config.steps and ev.step_time_s > 0


def test_more_engines_than_rollouts_is_named() -> None:
    node = NodeSpec(count=2, cores=4, gpus=0, kind="test-kind")
    spec = PlacementSpec(
        runtime="const",
        batcher=BatcherSpec(kind="fixed", batch_size=4),
        colocated=True,
        engine_units=1,
        schedule="sequential",
    )
    ev = evaluate(node, make_profile(score_s=0.001), fixed_workload(), spec, steps=1)  # 4 rollouts, 8 engines
    assert ev.bottleneck == "generation" and "4 of 8 engines get no rollout" in ev.bottleneck_detail
    assert ev.steps[0].engine_makespan_mean_s == pytest.approx(ev.steps[0].engine_makespan_max_s)
