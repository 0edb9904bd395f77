"""Reading the loop's and the contention experiment's results.json into profile sections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.planner.measure.build_profile import LoopRun, ProfileConfig, build_profile
from rlsim.planner.measure.loop_results import generation_point, read_contention, read_loop_steps, trainer_model
from tests.helpers.planner_cases import make_profile


def write_run(path: Path, tokens: list[int], gen_tps: float, update_per_token: float = 0.001) -> Path:
    """A results.json in issue 4's schema: step 0 is warm-up (slow), the rest follow the given rates."""
    steps = []
    for i, tok in enumerate(tokens):
        gen = tok / gen_tps * (3.0 if i == 0 else 1.0)
        steps.append(
            {
                "step": i,
                "time_s": {
                    "generate": gen,
                    "score": 0.5,
                    "update": 0.2 + update_per_token * tok,
                    "sync": 0.1,
                    "idle": 0.05,
                    "total": gen + 0.85 + update_per_token * tok,
                },
                "rollouts": {"generated": 8, "scored": 8, "trained": 8},
                "cpu_s": {"rollout": 1.0},
                "tokens": {"generated": tok},
            }
        )
    path.write_text(json.dumps({"steps": steps, "overhead_fraction": 0.01}))
    return path


def test_generation_point_skips_warm_up_and_takes_the_median(tmp_path: Path) -> None:
    steps = read_loop_steps(write_run(tmp_path / "r.json", [1000, 1000, 1200, 800], gen_tps=500.0))
    assert len(steps.time_s["generate"]) == 3
    assert generation_point(steps, running=8, units=2).tokens_per_s == pytest.approx(500.0)


def test_trainer_fit_from_steps(tmp_path: Path) -> None:
    run = read_loop_steps(write_run(tmp_path / "r.json", [0, 1000, 2000, 3000], gen_tps=500.0))
    trainer = trainer_model([run], units=2)
    assert (trainer.update_fixed_s, trainer.update_s_per_token) == (pytest.approx(0.2), pytest.approx(0.001))
    assert trainer.sync_s(1000) == pytest.approx(0.1)
    assert trainer.step_overhead_s == pytest.approx(0.05)


def test_results_without_the_loop_schema_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{"time_s": {"generate": 1}}]}))
    with pytest.raises(RlsimError, match="lacks time_s"):
        read_loop_steps(bad)


def test_contention_reads_means_and_reports_missing_score_slowdown(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {
                "baseline": "eager",
                "runtimes": {
                    "eager": {
                        "gen_slowdown": {"mean": 0.3, "ci_low": 0.2, "ci_high": 0.4},
                        "score_slowdown": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6},
                    },
                    "native": {"gen_slowdown": {"mean": 0.1, "ci_low": 0.05, "ci_high": 0.15}},
                },
            }
        )
    )
    entries, missing = read_contention(path)
    assert entries["eager"].score_slowdown == 0.5
    assert entries["native"].score_slowdown == 0.1 and "native" in missing[0]


def test_build_profile_from_loop_runs_and_fill_from(tmp_path: Path) -> None:
    write_run(tmp_path / "a.json", [100, 1000, 1000, 1000], gen_tps=400.0)
    write_run(tmp_path / "b.json", [100, 2000, 2000, 2000], gen_tps=700.0)
    config = ProfileConfig(
        hardware_kind="here",
        runtimes=["eager"],
        loop_runs=[LoopRun(path="a.json", running=8, units=2), LoopRun(path="b.json", running=32, units=2)],
    )
    built = build_profile(config, tmp_path, measure=False, fill_from=make_profile())
    profile = built.profile
    assert profile.generation is not None and profile.generation.fit.n_samples == 2
    assert profile.generation.step_s(8, 2) == pytest.approx(8 / 400.0)
    assert profile.generation.step_s(32, 2) == pytest.approx(32 / 700.0)
    assert any("contention: copied" in u for u in built.unmeasured)
    assert any("eager: scorer timing skipped" in u for u in built.unmeasured)
    assert "const" in profile.runtimes  # copied from --fill-from, and listed as unmeasured


def test_profile_command_reports_what_it_could_not_measure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rlsim.cli.main import main
    from rlsim.planner.profile.schema import load_profile, save_profile

    save_profile(make_profile(), tmp_path / "base.json")
    write_run(tmp_path / "a.json", [100, 1000, 2000], gen_tps=400.0)
    (tmp_path / "p.yaml").write_text(
        "hardware_kind: here\nruntimes: [eager]\nloop_runs:\n  - {path: a.json, running: 8, units: 2}\n"
    )
    assert (
        main(
            [
                "profile",
                str(tmp_path / "p.yaml"),
                "--out",
                str(tmp_path / "out.json"),
                "--no-scorers",
                "--fill-from",
                str(tmp_path / "base.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "measured" in out and "update/sync cost per token" in out
    assert "generation: generation was measured at one concurrency only" in out.replace("\n", " ")
    profile = load_profile(tmp_path / "out.json")
    assert profile.generation == make_profile().generation  # copied, since one point cannot fit a curve
    assert profile.trainer is not None and profile.trainer.update_s_per_token == pytest.approx(0.001)


@pytest.mark.slow
def test_profile_measures_a_real_scorer(tmp_path: Path) -> None:
    from rlsim.planner.measure.scorers import ScorerGrid, measure_runtime
    from rlsim.planner.profile.fitting import fit_latency_model

    grid = ScorerGrid(batch_sizes=[1, 4], lengths=[16, 48], units=[1], repeats=2, warmup=1)
    samples, max_length = measure_runtime("eager", "minilm-rm", "cpu", grid)
    assert len(samples) == 8 and max_length > 0
    # Longer texts really were longer: the scorer's own padded-token counts grow with the grid.
    by_cell = {(s.batch, s.padded_tokens) for s in samples}
    assert len(by_cell) == 4
    model = fit_latency_model(samples, "cpu", max_length)
    assert model.latency_s(4, 4 * 48, 1) > model.latency_s(1, 16, 1) > 0


def test_validation_entry_and_report(tmp_path: Path) -> None:
    from rlsim.planner.sim.evaluate import evaluate
    from rlsim.planner.spec.cluster import NodeSpec
    from rlsim.planner.validate.compare import validation_entry, validation_report
    from tests.helpers.planner_cases import fixed_workload, placement

    node = NodeSpec(count=1, cores=2, gpus=0, kind="test-kind")
    # Hand case of test_simulate: predicted step 5.5 s for 4 rollouts.
    predicted = evaluate(node, make_profile(max_running=1), fixed_workload(), placement("sequential"), steps=1)
    run = read_loop_steps(write_run(tmp_path / "r.json", [0, 5000, 5000, 5000], gen_tps=1000.0, update_per_token=0.0))
    # Measured steps: generate 5, score 0.5, update 0.2, sync 0.1, idle 0.05 -> 5.85 s.
    entry = validation_entry("hand", predicted, run)
    assert entry["measured_step_s"] == pytest.approx(5.85)
    assert entry["error"] == pytest.approx(5.5 / 5.85 - 1)
    assert entry["measured_rollouts_per_hour"] == pytest.approx(8 * 3600 / 5.85)
    report = validation_report([entry, {**entry, "error": 0.2}, {**entry, "error": -0.01}])
    assert report["median_abs_error"] == pytest.approx(abs(5.5 / 5.85 - 1))
    assert report["max_abs_error"] == pytest.approx(0.2)


def test_loop_run_settings_are_read_from_the_results_file(tmp_path: Path) -> None:
    # rlsim run records its config and each actor's cores: 8 prompts x 4 samples on 2 rollout cores.
    path = write_run(tmp_path / "r.json", [100, 1000, 2000], gen_tps=400.0)
    data = json.loads(path.read_text())
    data["config"] = {"workload": {"prompts_per_step": 8, "group_size": 4}}
    data["placement"] = {"rollout": {"cores": [0]}, "scorer": {"cores": [1]}, "trainer": {"cores": [1]}}
    path.write_text(json.dumps(data))
    config = ProfileConfig(hardware_kind="here", loop_runs=[LoopRun(path="r.json")], max_running=16)
    built = build_profile(config, tmp_path, measure=False, fill_from=make_profile())
    # One concurrency cannot fit a curve; the message shows it was read as 32 capped at max_running.
    assert any("one concurrency only (16 running" in u for u in built.unmeasured)
    assert built.profile.trainer is not None and built.profile.trainer.units == 1
    path.write_text(json.dumps({"steps": data["steps"]}))
    with pytest.raises(RlsimError, match="does not say how the run was set up"):
        from rlsim.planner.measure.loop_results import read_run_settings

        read_run_settings(path)
