"""The profile's roles section (PPO's reference and critic): schema, old profiles, measuring, and where
PPO reaches the planner (loop configs, validation reports, cluster plans)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rlsim.errors import RlsimError
from rlsim.loop.config import load_run_config
from rlsim.planner.measure.roles import RolesGrid, synthetic_rollouts
from rlsim.planner.profile.schema import RolesModel, load_profile, save_profile
from rlsim.planner.search.plan import prepare
from rlsim.planner.spec.cluster import load_plan_config
from rlsim.planner.validate.compare import validation_report
from rlsim.planner.validate.predict import knobs_from_run_config, predict_step
from tests.helpers.planner_cases import constant, roles_profile

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_a_profile_with_roles_round_trips(tmp_path: Path) -> None:
    profile = roles_profile()
    loaded = load_profile(save_profile(profile, tmp_path / "p.json"))
    assert loaded == profile
    assert loaded.roles is not None and loaded.roles.reference["ort"].intercept_s == 0.4


@pytest.mark.parametrize("name", ["cpu_2core_avx2_measured.json", "example_cpu_2core.json", "h100_published.json"])
def test_profiles_written_before_roles_stay_readable(name: str) -> None:
    assert load_profile(CONFIGS / "profiles" / name).roles is None


def test_roles_need_the_policys_own_forward() -> None:
    with pytest.raises(ValidationError, match="needs eager"):
        RolesModel(micro_batch=16, reference={"ort": constant(0.1)}, values=constant(0.1), update_critic=constant(0.1))


def test_sharing_efficiency_is_read_at_the_processes_thread_count() -> None:
    base = roles_profile().roles
    assert base is not None and base.efficiency(4) == base.sharing_efficiency  # none per thread count: the one
    roles = base.model_copy(update={"sharing_efficiency_by_threads": {1: 0.9, 2: 0.6}, "sharing_efficiency": 0.6})
    assert [roles.efficiency(t) for t in (0.5, 1, 1.5, 2, 8)] == [0.9, 0.9, 0.9, 0.6, 0.6]
    with pytest.raises(ValidationError, match="threads >= 1 and values in"):
        RolesModel.model_validate({**roles.model_dump(), "sharing_efficiency_by_threads": {1: 1.2}})


def test_the_roles_grid_lists_every_problem() -> None:
    with pytest.raises(ValidationError) as err:
        RolesGrid(reference_runtimes=["ort"], batch_sizes=[4, 32], micro_batch=16)
    assert "needs eager" in str(err.value) and "exceed micro_batch 16" in str(err.value)
    # 5 operations x 2 x 2 cells, + the actor's ragged cell per batch size, x 2 threads x (1 + 2 repeats)
    assert RolesGrid().calls() == (5 * 2 * 2 + 2) * 2 * 3


def test_synthetic_rollouts_have_the_asked_lengths() -> None:
    rollouts = synthetic_rollouts(3, prompt=5, response=7, vocab=100)
    assert [(len(r.prompt_ids), len(r.response_ids)) for r in rollouts] == [(5, 7)] * 3
    assert len({r.uid for r in rollouts}) == 3
    assert all(0 < t < 100 for r in rollouts for t in r.prompt_ids + r.response_ids)


def test_a_ppo_loop_config_becomes_the_roles_it_starts() -> None:
    config = load_run_config(
        CONFIGS / "ppo.yaml", ["placement.colocate=[[reference,scorer],[critic,trainer]]", "reference.micro_batch=8"]
    )
    knobs = knobs_from_run_config(config, cores=2)
    assert (knobs.reference_runtime, knobs.critic, knobs.reference_micro_batch) == ("ort", True, 8)
    assert knobs.colocate == [["reference", "scorer"], ["critic", "trainer"]]
    grpo = knobs_from_run_config(load_run_config(CONFIGS / "default.yaml"), cores=2)
    assert (grpo.reference_runtime, grpo.critic) == (None, False)


def test_predicting_ppo_from_a_profile_without_roles_names_the_fix() -> None:
    config = load_run_config(CONFIGS / "ppo.yaml", ["placement.pool=[0,1]"])
    with pytest.raises(RlsimError, match="has no roles section.*rlsim profile configs/profiles/measure_cpu_2core"):
        predict_step(config, load_profile(CONFIGS / "profiles" / "cpu_2core_avx2_measured.json"))


def test_the_validation_report_keeps_ppo_apart() -> None:
    entries = [
        {"name": "a", "error": 0.05, "algorithm": "grpo"},
        {"name": "b", "error": -0.15, "algorithm": "grpo"},
        {"name": "c", "error": 0.20, "algorithm": "ppo"},
    ]
    report = validation_report(entries)
    assert report["median_abs_error"] == pytest.approx(0.15)
    assert report["by_algorithm"]["grpo"] == pytest.approx(
        {"configs": 2, "median_abs_error": 0.10, "mean_abs_error": 0.10, "max_abs_error": 0.15}
    )
    assert report["by_algorithm"]["ppo"]["max_abs_error"] == pytest.approx(0.20)


def test_plan_does_not_silently_drop_ppo() -> None:
    config, profile = load_plan_config(CONFIGS / "cluster_cpu_small.yaml", ["workload.algorithm=ppo"])
    with pytest.raises(RlsimError, match="workload.algorithm ppo.*configs/validate_cpu_ppo.yaml"):
        prepare(config, profile)


def test_a_refit_keeps_the_stored_sharing_or_measures_it_per_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlsim.planner.measure import sections
    from rlsim.planner.measure.sections import roles_section

    stored = load_profile(CONFIGS / "profiles" / "cpu_2core_measured.json")
    assert stored.roles is not None and stored.roles.sharing_efficiency_by_threads

    def must_not_measure(grid: RolesGrid, quiet: object = None) -> dict[int, float]:
        raise AssertionError("the stored profile has it per thread count")

    monkeypatch.setattr(sections, "measure_sharing", must_not_measure)  # patched where it is called
    kept = roles_section(RolesGrid(), True, stored, None, [], [])
    assert kept is not None and kept.sharing_efficiency_by_threads == stored.roles.sharing_efficiency_by_threads
    # A profile stored before the per-thread measurement gets it measured now; the samples are re-fitted.
    older = stored.model_copy(update={"roles": stored.roles.model_copy(update={"sharing_efficiency_by_threads": {}})})
    monkeypatch.setattr(sections, "measure_sharing", lambda grid, quiet=None: {1: 0.9, 2: 0.5})
    measured: list[str] = []
    roles = roles_section(RolesGrid(), True, older, None, measured, [])
    assert roles is not None and roles.sharing_efficiency_by_threads == {1: 0.9, 2: 0.5}
    assert roles.sharing_efficiency == 0.5 and roles.sharing_efficiency_measured
    assert any("sharing efficiency measured now" in m for m in measured)
    assert any("90% at 1 thread(s) each, 50% at 2" in m for m in measured)


def test_a_refit_of_a_profile_without_the_actor_update_times_only_that(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlsim.planner.measure import sections
    from rlsim.planner.measure.roles import RolesSamples
    from rlsim.planner.measure.sections import roles_section
    from rlsim.planner.profile.schema import UpdateSample

    stored = load_profile(CONFIGS / "profiles" / "cpu_2core_measured.json")
    assert stored.roles is not None and stored.roles.update_actor is not None
    older = stored.model_copy(
        update={"roles": stored.roles.model_copy(update={"update_actor": None, "optimizer_step_s": {}})}
    )
    asked: list[object] = []
    # 0.1 s + 1 ms per response token + 0.5 ms per padded token, at one thread, and the 0.25 s optimizer step
    # each timed update held, which the fit takes off.
    rows = [(b, b * (32 + n), b * n) for b in (4, 16) for n in (48, 160)]
    fake = [
        UpdateSample(batch=b, padded_tokens=p, response_tokens=r, latency_s=0.35 + 1e-3 * r + 5e-4 * p, units=1)
        for b, p, r in rows
    ]

    def timed(grid: RolesGrid, on_cell: object = None, quiet: object = None, only: object = None) -> RolesSamples:
        asked.append(only)
        return RolesSamples({"update_actor": fake, "update_critic": []}, 512, {"actor": {1: [0.2, 0.3, 0.25]}})

    monkeypatch.setattr(sections, "measure_roles", timed)
    measured: list[str] = []
    roles = roles_section(RolesGrid(), True, older, None, measured, [])
    assert asked == [("update_actor",)]
    assert roles is not None and roles.update_actor is not None and roles.optimizer_step_s == {"actor": {1: 0.25}}
    model = roles.update_actor
    assert (model.intercept_s, model.per_response_token_s, model.per_padded_token_s) == pytest.approx((0.1, 1e-3, 5e-4))
    # The rest re-fitted from the stored samples (to round-off).
    assert roles.update_critic.samples == stored.roles.update_critic.samples
    assert roles.update_critic.per_padded_token_s == pytest.approx(stored.roles.update_critic.per_padded_token_s)
    assert any("actor's update and its optimizer step timed now" in m for m in measured)


@pytest.mark.slow
def test_profile_times_the_real_reference_and_critic() -> None:
    from rlsim.planner.measure.sections import roles_section

    grid = RolesGrid(reference_runtimes=["eager"], batch_sizes=[1, 2], lengths=[8, 16], units=[1], repeats=1)
    measured: list[str] = []
    roles = roles_section(grid, True, None, None, measured, [])
    assert roles is not None and set(roles.reference) == {"eager"}
    for model in (roles.reference["eager"], roles.values, roles.update_critic):
        # One sample per cell, each one micro-batch of prompt (32) + response tokens padded.
        assert sorted((s.batch, s.padded_tokens) for s in model.samples) == [(1, 40), (1, 48), (2, 80), (2, 96)]
    # Two processes on one core: measured per thread count, and at most the work of one alone.
    assert roles.sharing_efficiency_measured and 0 < roles.sharing_efficiency <= 1
    assert roles.sharing_efficiency_by_threads == {1: roles.sharing_efficiency}
    assert any("keep" in line for line in measured)
    # The actor's update, with its response tokens, and both roles' optimizer steps at the one thread count.
    assert roles.update_actor is not None
    cells = sorted((x.batch, x.padded_tokens, x.response_tokens) for x in roles.update_actor.samples)
    # and a ragged one: one 8- and one 16-token response in a batch padded to 2 x (32 + 16).
    assert cells == [(1, 40, 8), (1, 48, 16), (2, 80, 16), (2, 96, 24), (2, 96, 32)]
    assert set(roles.optimizer_step_s) == {"actor", "critic"}
    assert all(0 < by[1] < 5 for by in roles.optimizer_step_s.values())


def test_a_ppo_runs_role_phases_are_compared(tmp_path: Path) -> None:
    import json

    from rlsim.planner.measure.loop_results import read_loop_steps
    from rlsim.planner.sim.evaluate import evaluate
    from rlsim.planner.sim.ppo_roles import RolesSpec
    from rlsim.planner.spec.cluster import NodeSpec
    from rlsim.planner.validate.compare import validation_entry
    from tests.helpers.planner_cases import fixed_workload, placement

    phases = {"generate": 2.0, "score": 1.0, "update": 1.0, "sync": 0.2, "idle": 0.1, "total": 4.5}
    roles = {"reference": 0.5, "values": 0.4, "advantages": 0.1, "update_actor": 0.6, "update_critic": 0.5}
    step = {"rollouts": {"generated": 4, "scored": 4, "trained": 4}, "tokens": {"generated": 40}}
    steps = [{"step": n, "time_s": {**phases, **roles}, **step} for n in (1, 2)]
    (tmp_path / "r.json").write_text(json.dumps({"steps": steps}))
    run = read_loop_steps(tmp_path / "r.json")
    assert run.time_s["update_critic"] == pytest.approx([0.5])  # step 1 is warm-up
    node = NodeSpec(count=1, cores=2, kind="test-kind")
    spec = placement(colocated=True)
    roles_spec = RolesSpec(reference_runtime="ort", critic=True)
    ppo = evaluate(node, roles_profile(), fixed_workload(), spec, 1, roles=roles_spec)
    entry = validation_entry("ppo", ppo, run)
    assert entry["phases_s"]["update_critic"] == pytest.approx({"predicted": 0.45, "measured": 0.5})
    grpo = validation_entry("grpo", evaluate(node, roles_profile(), fixed_workload(), spec, 1), run)
    assert "reference" not in grpo["phases_s"]  # nothing predicted to compare with


def test_the_ppo_validation_set_is_ppo_and_apart_from_calibration() -> None:
    from rlsim.planner.measure.loop_set import load_loop_set, resolve_cases

    def cases(name: str) -> list:
        loop_set, base = load_loop_set(CONFIGS / name)
        return resolve_cases(loop_set, base)

    ppo = cases("validate_cpu_ppo.yaml")
    assert {c.config.trainer.algorithm for c in ppo} == {"ppo"}
    assert [c.config.placement.colocate for c in ppo].count([]) == 2  # two shared, one with colocation groups
    calibration = cases("profiles/calibrate_cpu.yaml")
    assert {c.config.trainer.algorithm for c in calibration} == {"grpo"}
    assert not {c.name for c in ppo} & {c.name for c in calibration}
    # Every configuration is simulated from the measured profile once it has a roles section.
    measured = load_profile(CONFIGS / "profiles" / "cpu_2core_measured.json")
    profile = measured.model_copy(update={"roles": roles_profile().roles})
    for case in ppo:
        steps = predict_step(case.config, profile, replay=[2]).steps
        assert steps[0].time_s["update_critic"] > 0 and steps[0].time_s["reference"] > 0
