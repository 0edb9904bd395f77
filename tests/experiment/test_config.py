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
    path = write(tmp_path, """
contention: {runtimes: [ort, ort, nonsense], baseline: eager, repeats: 2}
loop:
  placement: {preset: split}
  ray: {address: auto}
  faults: {kill_scorer_steps: [1]}
""")
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
