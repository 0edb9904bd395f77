"""The simulated PPO step (sim/ppo_roles.py) on cases worked out by hand.

The hand-made profile (planner_cases.make_profile): a scorer batch takes 0.5 s (fixed batches of 2), the
trainer's update 0.3 s, the sync 0.2 s. Roles, constant per call: the policy's forward (eager reference)
0.1 s, the ort reference 0.4 s, the critic's values 0.2 s and its update 0.25 s. One step of 4 rollouts
on a 2-core node, everything on both cores (colocated placement: the loop's ``shared``); every role
wants both cores, so while k are busy each runs at 1/k speed.
"""

from __future__ import annotations

import pytest

from rlsim.errors import RlsimError
from rlsim.planner.profile.schema import ContentionEntry, ContentionModel
from rlsim.planner.sim.evaluate import Evaluation, evaluate
from rlsim.planner.sim.ppo_roles import RolesSpec
from rlsim.planner.spec.cluster import NodeSpec
from rlsim.planner.spec.placement import PlacementError
from rlsim.planner.spec.workload import Workload
from rlsim.planner.validate.predict import ReplayWorkload
from rlsim.workloads import FixedLengths
from tests.helpers.planner_cases import fixed_workload, make_profile, placement, roles_profile


def step(
    node: NodeSpec, roles: RolesSpec | None, schedule: str = "sequential", workload: Workload | None = None
) -> Evaluation:
    return evaluate(
        node,
        roles_profile(),
        workload or fixed_workload(),
        placement(schedule, colocated=True),
        steps=1,
        noise=False,
        roles=roles,
    )


PPO = RolesSpec(reference_runtime="ort", critic=True)


def test_roles_on_shared_cores_overlap_and_the_tail_is_their_work(two_core_node: NodeSpec) -> None:
    grpo = step(two_core_node, None).steps[0].time_s
    t = step(two_core_node, PPO).steps[0].time_s
    # Scorer (two 0.5 s batches), reference 0.4 s and values 0.2 s start together at a third of the speed:
    # values end at 0.6 s; the reference's last 0.2 s at half speed end at 1.0 s; the scorer, 0.4 s done
    # by then, ends at 1.6 s. The pool never idles, so the tail is the work: 1.0 + 0.4 + 0.2.
    assert grpo["score_tail"] == pytest.approx(1.0)
    assert t["score_tail"] == pytest.approx(1.6)
    assert t["values"] == pytest.approx(0.6)
    assert t["reference"] == pytest.approx(1.0)
    assert t["score"] == pytest.approx(1.6)
    assert t["generate"] == pytest.approx(grpo["generate"])


def test_the_critic_adds_its_update_beside_the_actors(two_core_node: NodeSpec) -> None:
    t = step(two_core_node, PPO).steps[0].time_s
    # Advantages: the policy's forward, 0.1 s; the actor update is the rest of the trainer's 0.3 s (0.2 s).
    # Actor and critic (0.25 s) share the cores: the actor ends at 0.4 s, the critic's last 0.05 s alone.
    assert t["advantages"] == pytest.approx(0.1)
    assert t["update_actor"] == pytest.approx(0.4)
    assert t["update_critic"] == pytest.approx(0.45)
    assert t["update"] == pytest.approx(0.55)
    assert t["total"] == pytest.approx(t["generate"] + 1.6 + 0.55 + 0.2)


def test_colocated_roles_take_turns(two_core_node: NodeSpec) -> None:
    groups = (("reference", "scorer"), ("critic", "trainer"))
    apart = step(two_core_node, PPO).steps[0].time_s
    t = step(two_core_node, RolesSpec(reference_runtime="ort", critic=True, colocate=groups)).steps[0].time_s
    # reference+scorer is one process beside the critic: half speed until the critic's values end (0.4 s,
    # 0.2 s of the first batch done), then the batches (0.3 + 0.5 s) and the reference (0.4 s) in turn.
    assert t["values"] == pytest.approx(0.4)
    assert t["score"] == pytest.approx(1.2)
    assert t["reference"] == pytest.approx(0.4)  # alone, after the scorer
    assert t["score_tail"] == pytest.approx(apart["score_tail"])  # same work on the same cores
    # critic+trainer: the actor update (0.2 s) first, then the critic's (0.25 s).
    assert (t["update_actor"], t["update_critic"], t["update"]) == pytest.approx((0.2, 0.25, 0.55))


def test_a_reference_without_a_critic_leaves_the_update_to_the_trainer(two_core_node: NodeSpec) -> None:
    t = step(two_core_node, RolesSpec(reference_runtime="eager")).steps[0].time_s
    # Scorer 1.0 s and reference 0.1 s: the reference ends at 0.2 s at half speed; 1.1 s of work in all.
    assert t["score_tail"] == pytest.approx(1.1)
    assert t["reference"] == pytest.approx(0.2)
    assert (t["update"], t["update_critic"]) == pytest.approx((0.3, 0.0))


def test_overlapped_roles_work_while_generation_goes_on(two_core_node: NodeSpec) -> None:
    # Half the rollouts finish long before the rest: their micro-batch (4) reaches the reference and the
    # critic early, so less of their work is left after generation than in the sequential schedule.
    trace = [([5] * 8, [5, 5, 5, 5, 40, 40, 40, 40])]
    workload = ReplayWorkload(prompts_per_step=2, group_size=4, response_tokens=FixedLengths(tokens=5), trace=trace)
    roles = RolesSpec(reference_runtime="ort", critic=True, micro_batch=4)
    seq = step(two_core_node, roles, "sequential", workload).steps[0].time_s
    ovl = step(two_core_node, roles, "overlapped", workload).steps[0].time_s
    assert ovl["score_tail"] < seq["score_tail"] - 0.3


def test_roles_beside_generation_split_the_pool_with_it_not_twice(two_core_node: NodeSpec) -> None:
    # Contention 1 and 1: beside generation a process wanting both cores runs at half speed, and so does
    # generation: generation claims the pool like one such process (core_sharing.GenerationClaim). Alone,
    # generation takes 2.0 s and the short rollouts are done at 0.25 s. Their micro-batch (4) sends the scorer
    # (two 0.5 s batches), the reference (0.4 s) and the critic (0.2 s) while the long ones generate: a
    # quarter of the pool each (three processes and generation; the old product of their split and
    # generation's slowdown gave a sixth), so the values end at 1.05 s; then a third each: the reference's
    # last 0.2 s end at 1.65 s; then the scorer at half speed (its first batch's last 0.1 s at 1.85 s, its
    # second at 2.85 s). Generation ran at 1/4, 1/3, 1/2 of its speed meanwhile (1.25 s of its 2 s done by
    # 2.85 s): it ends at 3.6 s. The long rollouts' micro-batch then shares the pool without generation
    # (values 0.6 s, reference 1.0 s, scorer 1.6 s: the tail).
    trace = [([5] * 8, [5, 5, 5, 5, 40, 40, 40, 40])]
    workload = ReplayWorkload(prompts_per_step=2, group_size=4, response_tokens=FixedLengths(tokens=5), trace=trace)
    contention = ContentionModel(default=ContentionEntry(gen_slowdown=1.0, score_slowdown=1.0))
    profile = roles_profile().model_copy(update={"contention": contention})
    roles = RolesSpec(reference_runtime="ort", critic=True, micro_batch=4)
    run = evaluate(
        two_core_node, profile, workload, placement("overlapped", colocated=True), 1, noise=False, roles=roles
    )
    t = run.steps[0].time_s
    assert t["generate"] == pytest.approx(3.6)
    assert t["values"] == pytest.approx(0.8 + 0.6)
    assert t["reference"] == pytest.approx(1.4 + 1.0)
    assert t["score_tail"] == pytest.approx(1.6)


def test_a_profile_without_roles_names_the_command_that_measures_them(two_core_node: NodeSpec) -> None:
    with pytest.raises(RlsimError, match="rlsim profile configs/profiles/measure_cpu_2core.yaml"):
        evaluate(two_core_node, make_profile(), fixed_workload(), placement(colocated=True), 1, roles=PPO)


def test_a_reference_runtime_the_profile_lacks_is_named(two_core_node: NodeSpec) -> None:
    with pytest.raises(RlsimError, match=r"runtime 'native' \(it has: eager, ort\)"):
        step(two_core_node, RolesSpec(reference_runtime="native"))


def test_ppo_on_several_nodes_is_refused() -> None:
    with pytest.raises(PlacementError, match="one node"):
        step(NodeSpec(count=2, cores=2, kind="test-kind"), PPO)


def test_scorer_calls_queue_in_the_order_the_loop_sent_them() -> None:
    import numpy as np

    from rlsim.planner.sim.ppo_roles import _batch_releases
    from rlsim.planner.sim.scoring import ScoringOutcome

    # Two micro-batches of 4 sent together at 0.25 s; alone, the scorer took the second at 0.75 s. In a
    # process shared with the reference, the loop's order is score 1, reference 1, score 2, reference 2:
    # the second batch's call was sent at 0.25 s, not when it happened to start.
    outcome = ScoringOutcome(0.0, 2, 0, 0, [[0.25, 0.75]], [[0.75, 1.25]], np.array([0.75] * 4 + [1.25] * 4))
    parts = [(0.25, np.arange(4)), (0.25, np.arange(4, 8))]
    assert _batch_releases(outcome, parts, "overlapped", "round_robin", 2.0) == [[0.25, 0.25]]
    assert _batch_releases(outcome, parts, "sequential", "round_robin", 2.0) == [[2.0, 2.0]]
    assert _batch_releases(outcome, parts, "overlapped", "pull", 2.0) == [[0.25, 0.75]]
