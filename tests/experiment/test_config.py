"""The experiment's config: every problem listed at once, --quick / --repeats / --runtimes on top, CLI errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlsim.cli.main import main
from rlsim.errors import ConfigError
from rlsim.experiment.config import load_contention_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_the_shipped_configs_load() -> None:
    cpu = load_contention_config(CONFIGS / "contention_cpu.yaml")
    assert cpu.contention.baseline in cpu.contention.runtimes
    quick = load_contention_config(CONFIGS / "contention_cpu.yaml", quick=True)
    assert quick.contention.runtimes == cpu.contention.quick.runtimes
    assert quick.contention.repeats == cpu.contention.quick.repeats
    assert quick.contention.timebox.budget_s == cpu.contention.quick.budget_s
    assert quick.contention.together_trials == cpu.contention.quick.together_trials
    # The GPU variant is documentation here (no GPU): it must still be a valid config.
    from rlsim.config_loader import load_config
    from rlsim.experiment.config import ContentionConfig, contention_problems

    gpu = load_config(ContentionConfig, CONFIGS / "contention_gpu.yaml")
    assert gpu.loop.reward.device == "cuda" and contention_problems(gpu) == []


def test_cli_flags_win_over_quick_and_quick_over_the_file(tmp_path: Path) -> None:
    # --quick replaces runtimes, repeats, steps and the budget with contention.quick (changed with
    # --set contention.quick.*); --repeats and --runtimes win over both.
    path = write(tmp_path, "contention: {runtimes: [eager, ort], repeats: 5, timebox: {budget_s: 9}}\n")
    c = load_contention_config(path, ["contention.quick.budget_s=3"], quick=True, repeats=3, runtimes=["eager"])
    assert (c.contention.repeats, c.contention.runtimes, c.contention.timebox.budget_s) == (3, ["eager"], 3.0)


def test_for_runtime_sets_the_runtime_schedule_and_steps(tmp_path: Path) -> None:
    c = load_contention_config(write(tmp_path, "contention: {runtimes: [eager, ort], steps_per_condition: 2}\n"))
    loop = c.for_runtime("ort")
    assert (loop.reward.runtime, loop.schedule, loop.steps) == ("ort", "overlapped", 2)


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
contention: {runtimes: [ort, ort, nonsense], baseline: eager, repeats: 2}
loop:
  placement: {preset: split}
  ray: {address: auto}
  faults: {kill_scorer_steps: [1]}
""",
    )
    with pytest.raises(ConfigError) as err:
        load_contention_config(path)
    text = "\n".join(err.value.errors)
    for needle in ("names a runtime twice", "baseline", "nonsense", "preset", "ray.address", "loop.faults"):
        assert needle in text, needle


def test_one_repeat_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="repeats"):
        load_contention_config(write(tmp_path, "contention: {repeats: 1}\n"))


def test_cli_reports_a_bad_config_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "contention: {baseline: nothing}\n")
    assert main(["experiment", "contention", str(path)]) == 2
    err = capsys.readouterr().err
    assert "contention.baseline" in err and "Traceback" not in err


def test_cli_rejects_unknown_runtimes_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "contention: {}\n")
    assert main(["experiment", "contention", str(path), "--runtimes", "eager,warp-drive"]) == 2
    assert "warp-drive" in capsys.readouterr().err


def test_http_server_faults_are_refused_too(tmp_path: Path) -> None:
    path = write(tmp_path, "contention: {runtimes: [eager, http]}\nloop:\n  faults: {kill_http_server_steps: [1]}\n")
    with pytest.raises(ConfigError, match="loop.faults"):
        load_contention_config(path)


def test_target_and_budget_flags(tmp_path: Path) -> None:
    path = write(tmp_path, "contention: {runtimes: [eager, ort], repeats: 5, max_minutes: 28}\n")
    # --target-ci alone: repeat until the target (the file's fixed count gives way), within the budget.
    c = load_contention_config(path, target_ci=0.1).contention
    assert (c.repeats, c.target_ci, c.max_minutes) == (None, 0.1, 28)
    c = load_contention_config(path, target_ci=0.1, max_minutes=60).contention
    assert (c.repeats, c.max_minutes) == (None, 60)
    # --repeats asks for exactly R: the file's budget no longer cuts it short, unless given again.
    assert load_contention_config(path, repeats=9).contention.max_minutes is None
    assert load_contention_config(path, repeats=9, max_minutes=50).contention.max_minutes == 50
    # Both: a fixed count, the target only reported.
    c = load_contention_config(path, repeats=4, target_ci=0.1).contention
    assert (c.repeats, c.target_ci) == (4, 0.1)


def test_an_open_ended_run_needs_a_target_and_a_budget(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_contention_config(write(tmp_path, "contention: {repeats: null}\n"))
    text = "\n".join(err.value.errors)
    assert "contention.target_ci" in text and "contention.max_minutes" in text
    with pytest.raises(ConfigError, match="max_minutes"):
        load_contention_config(write(tmp_path, "contention: {repeats: 5}\n"), target_ci=0.1)


def test_cli_refuses_a_bad_target_and_budget_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The flags refuse such numbers themselves (tests/cli); the same values from the file or --set are
    # config errors, reported together before anything starts.
    path = write(tmp_path, "contention: {runtimes: [eager, ort]}\n")
    argv = [
        "experiment",
        "contention",
        str(path),
        "--set",
        "contention.target_ci=0",
        "--set",
        "contention.max_minutes=-5",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "contention.target_ci" in err and "contention.max_minutes" in err
    assert main(["experiment", "contention", str(path), "--target-ci", "0"]) == 2
    assert "--target-ci" in capsys.readouterr().err


def test_the_ppo_and_async_configs_load_and_set_their_together_condition() -> None:
    for name in ("contention_ppo.yaml", "contention_async.yaml"):  # the full variants are valid too
        assert load_contention_config(CONFIGS / name).contention.repeats == 5
    ppo = load_contention_config(CONFIGS / "contention_ppo.yaml", quick=True)
    loop = ppo.for_runtime("ort-int8")
    assert loop.trainer.algorithm == "ppo" and loop.kl.coef > 0 and loop.schedule == "overlapped"
    assert ppo.conditions == ("gen_alone", "score_alone", "together", "timeboxed")
    a = load_contention_config(CONFIGS / "contention_async.yaml", quick=True)
    loop = a.for_runtime("eager")
    # async stays async (the generator must report behaviour log-probs, set at actor start), with
    # contention.async_updates updates per together run and no time-boxed condition
    assert (loop.schedule, loop.steps) == ("async", a.contention.async_updates)
    assert a.conditions == ("gen_alone", "score_alone", "together")


def test_colocation_and_async_with_ppo_roles_are_refused_together(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
contention: {runtimes: [eager, ort]}
loop:
  schedule: async
  trainer: {algorithm: ppo}
  placement: {colocate: [[critic, trainer]]}
""",
    )
    with pytest.raises(ConfigError) as err:
        load_contention_config(path)
    text = "\n".join(err.value.errors)
    assert "loop.placement.colocate: the experiment measures each role's core-seconds" in text
    assert "loop.schedule: async has no critic stage" in text


def test_async_needs_two_updates_per_together_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="async_updates"):
        load_contention_config(write(tmp_path, "contention: {async_updates: 1}\nloop: {schedule: async}\n"))


VARIANTS = """
contention:
  runtimes: [small-judge, tiny-judge]
  baseline: small-judge
  repeats: 2
  variants:
    small-judge: {runtime: genrm, genrm: {judge: small-llama, mode: score}}
    tiny-judge: {runtime: genrm, genrm: {judge: tiny-llama}}
loop:
  reward: {batch_size: 8, genrm: {max_tokens: 16}}
"""


def test_variants_compare_reward_settings_like_runtimes(tmp_path: Path) -> None:
    c = load_contention_config(write(tmp_path, VARIANTS))
    small, tiny = c.for_runtime("small-judge").reward, c.for_runtime("tiny-judge").reward
    assert (small.runtime, small.genrm.judge, small.genrm.mode) == ("genrm", "small-llama", "score")
    assert (tiny.runtime, tiny.genrm.judge, tiny.genrm.mode) == ("genrm", "tiny-llama", "verdict")
    # the loop's own reward settings stay under each variant's, nested sections merged key by key
    assert small.batch_size == tiny.batch_size == 8 and small.genrm.max_tokens == tiny.genrm.max_tokens == 16
    assert c.runtime_of("tiny-judge") == "genrm" and c.runtime_of("eager") == "eager"
    assert c.for_runtime("eager").reward.runtime == "eager"  # a plain runtime is unchanged beside variants
    shipped = load_contention_config(CONFIGS / "contention_judges.yaml")
    assert {shipped.runtime_of(name) for name in shipped.contention.runtimes} == {"genrm"}


def test_bad_variants_are_listed_with_every_other_problem(tmp_path: Path) -> None:
    text = (
        VARIANTS.replace("judge: tiny-llama}", "judge: tiny-llama, template: 'no placeholder'}")
        .replace(
            "  variants:\n",
            "  variants:\n    ort: {runtime: ort, batch_size: 4}\n    unused: {runtime: function}\n"
            "    nameless: {batch_size: 2}\n",
        )
        .replace("runtimes: [small-judge, tiny-judge]", "runtimes: [small-judge, tiny-judge, ort, nameless, bogus]")
    )
    with pytest.raises(ConfigError) as err:
        load_contention_config(write(tmp_path, text))
    text = "\n".join(err.value.errors)
    for needle in (
        "contention.variants.tiny-judge: genrm.template",  # the judge's template has no {response}
        "contention.variants.ort: 'ort' is a runtime's name",
        "contention.variants.unused: not in contention.runtimes",
        "contention.variants.nameless: name its runtime",
        "unknown runtime 'bogus'",
    ):
        assert needle in text, (needle, text)


def test_results_name_the_machine_they_were_measured_on(tmp_path: Path) -> None:
    import json

    from rlsim.experiment.runner import ExperimentOutputs

    ExperimentOutputs(tmp_path, load_contention_config(CONFIGS / "contention_cpu.yaml"), pool_cores=2)
    machine = json.loads((tmp_path / "results.json").read_text())["machine"]
    assert machine["cpu_model"] and machine["cores"] >= 1 and isinstance(machine["cpu_flags"], list)
