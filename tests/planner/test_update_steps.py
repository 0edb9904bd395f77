"""What ``trainer.mini_batch_size`` and ``trainer.epochs`` add to the planner's update (sim/update_steps.py),
on cases worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.loop.config import RunConfig
from rlsim.planner.profile.schema import Profile, RolesModel, UpdateCostModel
from rlsim.planner.sim.evaluate import evaluate
from rlsim.planner.sim.ppo_roles import RolesSpec
from rlsim.planner.sim.update_steps import UpdateShape, critic_update_s, extra_actor_s, update_calls_s
from rlsim.planner.spec.cluster import NodeSpec
from rlsim.planner.spec.placement import PlacementError
from rlsim.planner.validate.predict import knobs_from_run_config
from tests.helpers.planner_cases import EXACT, fixed_workload, placement, roles_profile

# A micro-batch's forward and backward: 0.1 s + 1 ms per padded token; an optimizer step of 0.05 s.
PADDED = UpdateCostModel(
    device="cpu", units=1, intercept_s=0.1, per_response_token_s=0.0, per_padded_token_s=0.001, fit=EXACT
)
TOKENS = np.array([10, 100, 20, 90])  # prompt + response, in the order the trainer gets them
RESPONSES = TOKENS - 5


def test_one_sorted_batch_pads_short_with_short() -> None:
    # Whole batch, micro-batches of 2: sorted [10, 20] (padded 40: 0.14 s) and [90, 100] (200: 0.30 s),
    # then one optimizer step: 0.49 s.
    assert update_calls_s(PADDED, 0.05, TOKENS, RESPONSES, UpdateShape(2), 1) == pytest.approx(0.49)
    # Mini-batches of 2 in arrival order: [10, 100] pads to 200 (0.30 s), [20, 90] to 180 (0.28 s), each
    # with its own step: 0.68 s, so cutting this batch costs 0.19 s more, 0.14 s of it padding.
    assert update_calls_s(PADDED, 0.05, TOKENS, RESPONSES, UpdateShape(2, 2), 1) == pytest.approx(0.68)
    # Two epochs: everything twice.
    assert update_calls_s(PADDED, 0.05, TOKENS, RESPONSES, UpdateShape(2, None, 2), 1) == pytest.approx(0.98)


def test_the_response_tokens_cost_the_same_however_the_batch_is_cut() -> None:
    # 10 ms per response token and nothing per padded token: the 200 response tokens cost 2 s in any
    # split, so two mini-batches add only their second optimizer step.
    per_response = PADDED.model_copy(
        update={"intercept_s": 0.0, "per_response_token_s": 0.01, "per_padded_token_s": 0.0}
    )
    one = update_calls_s(per_response, 0.05, TOKENS, RESPONSES, UpdateShape(2), 1)
    two = update_calls_s(per_response, 0.05, TOKENS, RESPONSES, UpdateShape(2, 2), 1)
    assert one == pytest.approx(2.0 + 0.05) and two - one == pytest.approx(0.05)


def _with_actor(profile: Profile, optimizer_s: float = 0.05) -> Profile:
    assert profile.roles is not None
    roles = profile.roles.model_copy(
        update={"update_actor": PADDED, "optimizer_step_s": {"actor": {1: optimizer_s}, "critic": {1: 0.02}}}
    )
    return profile.model_copy(update={"roles": roles})


def test_the_extra_is_the_difference_from_the_profiled_one_step_update() -> None:
    roles = _with_actor(roles_profile()).roles
    assert extra_actor_s(roles, TOKENS, RESPONSES, UpdateShape(2), 1) == 0.0  # what the fit measured
    assert extra_actor_s(roles, TOKENS, RESPONSES, UpdateShape(2, 2), 1) == pytest.approx(0.19)
    assert extra_actor_s(roles, TOKENS, RESPONSES, UpdateShape(2, None, 3), 1) == pytest.approx(2 * 0.49)
    # The critic (constant 0.25 s per timed call, 0.02 s of it the step): two mini-batches of one
    # micro-batch each are two calls; the whole batch, two micro-batches with one step: 0.48 s.
    assert roles is not None
    assert critic_update_s(roles, TOKENS, RESPONSES, UpdateShape(2, 2), 1) == pytest.approx(0.5)
    assert critic_update_s(roles, TOKENS, RESPONSES, UpdateShape(2), 1) == pytest.approx(0.48)


def test_a_profile_that_never_timed_the_actor_update_is_refused_with_the_fix(two_core_node: NodeSpec) -> None:
    with pytest.raises(ValueError, match="roles.update_actor.*rlsim profile"):
        extra_actor_s(None, TOKENS, RESPONSES, UpdateShape(2, 2), 1)
    with pytest.raises(PlacementError, match="trainer.mini_batch_size or trainer.epochs"):
        evaluate(two_core_node, roles_profile(), fixed_workload(), placement(), 1, update=UpdateShape(16, 2))
    evaluate(two_core_node, roles_profile(), fixed_workload(), placement(), 1, update=UpdateShape(16))  # one step


def test_the_simulated_update_grows_by_the_extra_steps(two_core_node: NodeSpec) -> None:
    profile = _with_actor(roles_profile())
    work = fixed_workload(prompts=1, group=4, response=10, prompt=5)  # four rollouts of 15 tokens

    def update(shape: UpdateShape, roles: RolesSpec | None = None) -> dict[str, float]:
        run = evaluate(two_core_node, profile, work, placement(), 1, noise=False, roles=roles, update=shape)
        return run.steps[0].time_s

    one, two = update(UpdateShape(2)), update(UpdateShape(2, None, 2))
    # A second epoch adds the whole-batch calls once: two micro-batches of 2 x 15 tokens (0.13 s each)
    # and one step, on the profile's one unit.
    assert two["update"] - one["update"] == pytest.approx(2 * 0.13 + 0.05)
    assert two["total"] - one["total"] == pytest.approx(two["update"] - one["update"])
    # With PPO's critic the same shape cuts the critic's update too (0.25 s per call, 0.02 s of it the step).
    ppo = RolesSpec(reference_runtime="ort", critic=True, critic_micro_batch=4)
    a, b = update(UpdateShape(2), ppo), update(UpdateShape(2, 2), ppo)
    assert b["update_critic"] > a["update_critic"]


def test_a_run_configs_mini_batches_and_epochs_reach_the_planner() -> None:
    config = RunConfig.model_validate({"trainer": {"mini_batch_size": 8, "epochs": 2}})
    knobs = knobs_from_run_config(config, cores=2)
    assert (knobs.mini_batch_size, knobs.epochs, knobs.trainer_micro_batch) == (8, 2, config.trainer.micro_batch)


def test_the_nearest_measured_thread_count_gives_the_optimizer_step() -> None:
    roles = RolesModel.model_validate(
        {**roles_profile().roles.model_dump(), "optimizer_step_s": {"actor": {1: 0.2, 2: 0.12}}}  # type: ignore[union-attr]
    )
    assert [roles.optimizer_s("actor", u) for u in (1, 1.5, 2, 8)] == [0.2, 0.12, 0.12, 0.12]
    assert roles.optimizer_s("critic", 2) is None


def test_a_cluster_plan_names_its_trainers_mini_batches(tmp_path) -> None:
    from pathlib import Path

    from rlsim.errors import RlsimError
    from rlsim.planner.search.plan import prepare, update_shape
    from rlsim.planner.spec.cluster import load_plan_config

    cluster = Path(__file__).resolve().parents[2] / "configs" / "cluster_cpu_small.yaml"
    with pytest.raises(RlsimError, match="mini_batch_size 7 does not divide the batch of 32"):
        load_plan_config(cluster, ["trainer.mini_batch_size=7"])
    config, profile = load_plan_config(cluster, ["trainer.mini_batch_size=8", "trainer.epochs=2"])
    assert update_shape(config) == UpdateShape(16, 8, 2)
    # Its illustrative profile never timed the actor's update: refused before anything is simulated.
    with pytest.raises(RlsimError, match="roles.update_actor.*rlsim profile"):
        prepare(config, profile)


def test_the_trainer_gets_rollouts_in_finish_order_when_the_schedule_streams() -> None:
    from rlsim.planner.sim.generation import deal
    from rlsim.planner.sim.step import trainer_order
    from rlsim.planner.sim.step_types import StepInputs

    batch = deal(np.array([5, 5, 5, 5]), np.array([40, 10, 30, 20]), 1)  # one engine, request order
    finish = np.array([[4.0, 1.0, 3.0, 2.0]])  # the shortest finishes first

    def order(schedule: str) -> list[int]:
        inputs = StepInputs(
            spec=placement(schedule), resources=None, profile=roles_profile(), workload=fixed_workload()
        )  # type: ignore[arg-type]
        tokens, responses = trainer_order(inputs, batch, finish)
        assert list(tokens - responses) == [5, 5, 5, 5]
        return list(responses)

    assert order("overlapped") == [10, 20, 30, 40]  # streamed as they finished (loop/schedules/step.py)
    assert order("sequential") == [40, 10, 30, 20]  # generated as a batch, in request order


def test_an_update_fit_needs_two_batch_sizes_and_takes_the_optimizer_step_off() -> None:
    from rlsim.errors import RlsimError
    from rlsim.planner.profile.fitting import fit_update_model
    from rlsim.planner.profile.schema import UpdateSample

    def sample(batch: int, length: int, ragged: int = 0) -> UpdateSample:
        # 0.05 s + 1 ms per response token + 0.5 ms per padded token, and a 0.2 s optimizer step.
        response, padded = batch * length - ragged, batch * (8 + length)
        return UpdateSample(
            batch=batch,
            padded_tokens=padded,
            response_tokens=response,
            latency_s=0.25 + 1e-3 * response + 5e-4 * padded,
            units=1,
        )

    # One batch size: padded - response = batch x prompt is constant, the intercept's direction.
    with pytest.raises(RlsimError, match="two batch sizes and two response lengths"):
        fit_update_model([sample(4, n) for n in (16, 32, 64)], "cpu", lambda units: 0.2)
    model = fit_update_model(
        [sample(b, n) for b in (2, 8) for n in (16, 64)] + [sample(8, 64, 96)], "cpu", lambda u: 0.2
    )
    assert (model.intercept_s, model.per_response_token_s, model.per_padded_token_s) == pytest.approx(
        (0.05, 1e-3, 5e-4)
    )
