"""Logs as users have them (``log_cases.py`` prints them as verl and OpenRLHF do) read into the same steps."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rlsim.cli.main import main
from rlsim.errors import RlsimError
from rlsim.planner.profile.fitting.logs import LogLayout, fit_log_profile, fit_warnings, replay_steps
from rlsim.planner.profile.logs.frameworks import load_framework_log
from rlsim.planner.profile.logs.replay import replay
from tests.helpers import log_cases


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("release", "told"),
    [
        ("0.3.0", "0.3 or earlier"),
        ("0.4.1", "0.4 "),
        ("0.5.0", "0.5 to 0.7.0"),
        ("0.6.0", "0.5 to 0.7.0"),
        ("0.7.1", "0.7.1 or later"),
    ],
)
def test_verl_console_of_each_release(tmp_path: Path, release: str, told: str) -> None:
    steps = log_cases.verl_steps(6, release=release, test_freq=3)
    log = load_framework_log(_write(tmp_path, "verl.log", log_cases.verl_console(steps, release)))
    assert log.format.name == "verl" and log.container == "verl-console" and told in log.release
    assert len(log.steps) == 6 and log.gpus == log_cases.GPUS  # read back from perf/throughput
    first, d = log.steps[0], steps[0]
    assert first.rollouts == 512 and first.response_mean == pytest.approx(d["response_length/mean"], abs=1e-3)
    assert first.gen_s == pytest.approx(d["timing_s/gen"], abs=1e-3)
    assert first.sync_s == pytest.approx(d.get("timing_s/update_weights", 0.0), abs=1e-3)
    validated = log.steps[2]
    assert validated.periodic == (("validation", pytest.approx(steps[2]["timing_s/testing"], abs=1e-3)),)
    assert validated.periodic_in_step is (release < "0.6")  # verl moved testing out of the step timer in 0.6
    assert validated.train_s == pytest.approx(log.steps[2].step_s - (validated.periodic_s if release < "0.6" else 0))


def test_ray_capture_colours_prefix_twice_and_one_key_per_line_read_the_same(tmp_path: Path) -> None:
    steps = log_cases.verl_steps(5, release="0.6.0")
    plain = load_framework_log(_write(tmp_path, "a.log", log_cases.verl_console(steps, "0.6.0"))).steps
    for per_line in (False, True):
        lines = log_cases.as_ray_captured(log_cases.verl_console(steps, "0.6.0"), twice=True, per_line=per_line)
        assert "np.float64(" in "".join(lines) and lines[0].startswith("\x1b[36m(TaskRunner pid=")
        config = "\x1b[36m(TaskRunner pid=48213)\x1b[0m {'actor_rollout_ref': {'rollout': {'n': 8}}, 'trainer': {}}"
        log = load_framework_log(_write(tmp_path, f"b{per_line}.log", [config, "INFO starting", *lines]))
        assert [(s.gen_s, s.step_s, s.rollouts) for s in log.steps] == [(s.gen_s, s.step_s, s.rollouts) for s in plain]
        assert any("printed twice" in w for w in log.warnings)


def test_file_logger_jsonl_reads_as_the_console(tmp_path: Path) -> None:
    steps = log_cases.verl_steps(4)
    console = load_framework_log(_write(tmp_path, "a.log", log_cases.verl_console(steps))).steps
    jsonl = load_framework_log(_write(tmp_path, "a.jsonl", log_cases.verl_file_logger(steps))).steps
    assert [s.step_s for s in jsonl] == pytest.approx([s.step_s for s in console])


def test_fork_without_total_tokens_counts_global_seqlen_times_world_size(tmp_path: Path) -> None:
    steps = log_cases.verl_steps(4)
    for d in steps:
        for key in ("perf/total_num_tokens", "perf/throughput"):
            del d[key]
    path = _write(tmp_path, "fork.jsonl", log_cases.verl_file_logger(steps))
    with pytest.raises(RlsimError, match="global_seqlen/mean x the world size.*give --gpus N"):
        load_framework_log(path)
    log = load_framework_log(path, world_size=8)
    assert "global_seqlen/mean x world size" in log.release and log.steps[0].rollouts == 512


def test_openrlhf_console_and_wandb_export_read_the_same(tmp_path: Path) -> None:
    steps = log_cases.openrlhf_steps(5)
    console = load_framework_log(_write(tmp_path, "train.log", log_cases.openrlhf_console(steps)))
    (tmp_path / "history.csv").write_text(log_cases.wandb_csv(steps))
    wandb = load_framework_log(tmp_path / "history.csv")
    assert console.format.name == wandb.format.name == "openrlhf"
    assert (console.container, wandb.container) == ("openrlhf-console", "wandb-csv")
    assert [s.gen_s for s in console.steps] == pytest.approx([s.gen_s for s in wandb.steps])
    (tmp_path / "cut.csv").write_text(log_cases.wandb_csv(steps).rstrip("\r\n")[:-3])
    cut = load_framework_log(tmp_path / "cut.csv")
    assert len(cut.steps) == 4 and "line 6 is cut off" in cut.warnings[0]
    rows = [{f"train/{k}": v for k, v in st.items()} for st in steps]
    (tmp_path / "history.json").write_text(json.dumps([{"_step": 0, "train/kl": None}, *rows]))
    as_json = load_framework_log(tmp_path / "history.json")
    assert as_json.container == "wandb-json" and [s.gen_s for s in as_json.steps] == [s.gen_s for s in wandb.steps]
    assert console.steps[0].rollouts == 256 and console.steps[0].step_s == pytest.approx(steps[0]["timing/step_total"])


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path: Path) -> None:
    lines = log_cases.verl_file_logger(log_cases.verl_steps(5))
    log = load_framework_log(_write(tmp_path, "cut.jsonl", [*lines[:-1], lines[-1][:200]]))
    assert len(log.steps) == 4 and "line 5 is cut off" in log.warnings[0]
    console = log_cases.verl_console(log_cases.verl_steps(5))
    log = load_framework_log(_write(tmp_path, "cut.log", [*console[:-1], console[-1][:300]]))
    assert len(log.steps) == 4 and any("incomplete" in w for w in log.warnings)
    # cut inside a value (timing_s/step:12 of 123.4): no newline at the end says the last step is incomplete
    cut_here = console[-1].index("timing_s/step:") + len("timing_s/step:") + 2
    (tmp_path / "cut2.log").write_text("\n".join([*console[:-1], console[-1][:cut_here]]))
    log = load_framework_log(tmp_path / "cut2.log")
    assert len(log.steps) == 4 and any("no newline at the end of the file): dropped step 5" in w for w in log.warnings)


@pytest.mark.parametrize("release", ["0.5.0", "0.7.1"])
def test_whole_run_total_replays_with_validation_and_checkpoint_steps(tmp_path: Path, release: str) -> None:
    # 30 steps, validation every 5 and a checkpoint every 10 (~26 s each): the per-step fit leaves them
    # out and the whole run adds them as logged, so the run's total replays, not only a typical step.
    steps = log_cases.verl_steps(30, release=release, test_freq=5, save_freq=10, seed=11)
    logged_total = sum(d["timing_s/step"] for d in steps)
    if release >= "0.6":
        logged_total += sum(d.get("timing_s/testing", 0) + d.get("timing_s/save_checkpoint", 0) for d in steps)
    log = load_framework_log(_write(tmp_path, "run.log", log_cases.verl_console(steps, release)))
    layout = LogLayout(gpus=8)
    r = replay(fit_log_profile(log.format, log.steps, layout, "t", notes=[]), log.steps, layout)
    assert r.logged_total_s == pytest.approx(logged_total, rel=1e-4)
    assert abs(r.total_error) < 0.05 and r.median_abs_error < 0.05, (r.total_error, r.median_abs_error)


def test_cli_prints_held_out_error_and_writes_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "run.log", log_cases.verl_console(log_cases.verl_steps(12, test_freq=4)))
    summary = tmp_path / "s.json"
    rc = main(["profile", "--from-log", str(path), "--out", str(tmp_path / "p.json"), "--summary", str(summary)])
    out = capsys.readouterr().out
    assert (
        rc == 0
        and "in sample (4 generation parameters on 12 steps): median |error|" in out
        and "held out (fitted on the first 8 steps)" in out
    )
    assert "validation: on 3 step(s)" in out
    doc = json.loads(summary.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in --summary"))
    assert doc["gpus"] == 8 and doc["gpus_from"] == "log" and doc["held_out"]["steps"] == 4
    assert abs(doc["in_sample"]["total_error"]) < 0.05 and doc["periodic_phases"]["validation"]["steps"] == 3
    per_phase = doc["held_out"]["phase_median_abs_error"]  # generation with its fixed term, as verl timed it
    assert set(per_phase) == {"generation", "scoring", "update", "sync"} and max(per_phase.values()) < 0.06, per_phase


def test_plan_replay_checks_a_profile_on_another_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _write(tmp_path, "one.log", log_cases.verl_console(log_cases.verl_steps(10, seed=1)))
    other = _write(tmp_path, "other.log", log_cases.verl_console(log_cases.verl_steps(8, seed=2)))
    profile = tmp_path / "p.json"
    assert main(["profile", "--from-log", str(one), "--out", str(profile)]) == 0
    capsys.readouterr()
    assert main(["plan", "replay", str(other), "--profile", str(profile), "--json", str(tmp_path / "r.json")]) == 0
    assert "whole run" in capsys.readouterr().out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["replay"]["steps"] == 8 and doc["replay"]["median_abs_error"] < 0.05


def test_fixed_generation_term_keeps_two_halves_of_a_run_agreeing_on_long_responses(tmp_path: Path) -> None:
    # log_cases' generation costs 2 s per step whatever it generates; without a fixed term the fit put that
    # on whatever barely varies, and two halves of one run disagreed 2.4x at 4,096-token responses.
    log = load_framework_log(_write(tmp_path, "a.log", log_cases.verl_console(log_cases.verl_steps(30, seed=7))))
    layout, predicted = LogLayout(gpus=8), []
    for part in (log.steps[:15], log.steps[15:]):
        profile = fit_log_profile(log.format, part, layout, "t", notes=[])
        fixed = next(n for n in profile.notes if "fixed per-step term" in n)
        assert 1.0 < float(fixed.split("term ")[1].split(" s")[0]) < 3.5, fixed
        longer = replace(part[0], response_mean=4096.0, response_max=8192.0)
        predicted.append(replay_steps(profile, [longer], layout)[0])
    assert predicted[0] == pytest.approx(predicted[1], rel=0.1)


def test_few_steps_and_lengths_that_barely_vary_are_warned_about(tmp_path: Path) -> None:
    log = load_framework_log(_write(tmp_path, "a.log", log_cases.verl_console(log_cases.verl_steps(12))))
    layout = LogLayout(gpus=8)
    assert fit_warnings(log.steps, layout) == []
    assert "4 parameters fitted to 5 steps" in fit_warnings(log.steps[:5], layout)[0]
    same = [
        replace(s, response_mean=500.0 + i * 1e-3, response_max=1000.0, prompt_mean=180.0)
        for i, s in enumerate(log.steps)
    ]
    assert any("condition number" in w for w in fit_warnings(same, layout))


def test_replay_warns_when_the_log_goes_beyond_the_fitted_lengths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = log_cases.verl_steps(8, seed=1)
    profile = tmp_path / "p.json"
    assert (
        main(
            [
                "profile",
                "--from-log",
                str(_write(tmp_path, "a.log", log_cases.verl_console(steps))),
                "--out",
                str(profile),
            ]
        )
        == 0
    )
    for d in steps:
        d["response_length/mean"] *= 4
        d["response_length/max"] *= 4
        d["perf/total_num_tokens"] = 512 * (d["prompt_length/mean"] + d["response_length/mean"])
        d["perf/throughput"] = d["perf/total_num_tokens"] / (d["timing_s/step"] * 8)
    capsys.readouterr()
    assert (
        main(
            ["plan", "replay", str(_write(tmp_path, "b.log", log_cases.verl_console(steps))), "--profile", str(profile)]
        )
        == 0
    )
    assert "extrapolating beyond the fitted log: mean response" in capsys.readouterr().err


def test_tensorboard_event_files_of_both_frameworks(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")  # only to write the files: rlsim reads them without it
    verl_steps = log_cases.verl_steps(5, release="0.6.0", test_freq=2)
    (tmp_path / "verl").mkdir()
    events = log_cases.tensorboard_events(tmp_path / "verl", verl_steps)
    log = load_framework_log(tmp_path / "verl")  # the folder, as users point at it
    assert (log.format.name, log.container, len(log.steps), log.gpus) == ("verl", "tensorboard", 5, 8)
    assert log.steps[1].periodic[0][1] == pytest.approx(verl_steps[1]["timing_s/testing"], rel=1e-6)  # float32
    events.write_bytes(events.read_bytes()[:-7])  # a run killed mid-write
    cut = load_framework_log(events)
    # only the last add_scalar's record is lost (one record per key): the steps before it read as before
    assert cut.steps[:4] == log.steps[:4] and any("the last record is cut off" in w for w in cut.warnings)
    (tmp_path / "orl").mkdir()
    orl = log_cases.tensorboard_events(tmp_path / "orl", log_cases.openrlhf_steps(4), prefix="train/")
    assert [s.rollouts for s in load_framework_log(orl).steps] == [256] * 4
    bad = tmp_path / "x.tfevents.bad"
    bad.write_bytes(b"\xff" * 40)
    with pytest.raises(RlsimError, match="not a TensorBoard record"):
        load_framework_log(bad)


def test_plan_warns_when_the_workload_goes_beyond_the_fitted_log(tmp_path: Path) -> None:
    import yaml

    from rlsim.planner.profile.fitting.logs import plan_placement

    log = _write(tmp_path, "a.log", log_cases.verl_console(log_cases.verl_steps(8, seed=1)))
    assert main(["profile", "--from-log", str(log), "--out", str(tmp_path / "p.json")]) == 0
    warnings = []
    for tokens in (600, 4096):  # the log's responses are 300-900 tokens on average
        plan = {
            "nodes": {"count": 1, "cores": 64, "gpus": 8, "kind": "from-log-verl", "gpu_model": "H100"},
            "profiles": {"from-log-verl": str(tmp_path / "p.json")},
            "workload": {
                "prompts_per_step": 64,
                "group_size": 8,
                "prompt_tokens": {"kind": "fixed", "tokens": 180},
                "response_tokens": {"kind": "fixed", "tokens": tokens},
            },
            "placement": plan_placement(512),
            "simulation": {"steps": 1},
        }
        (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
        assert main(["plan", str(tmp_path / "plan.yaml"), "--json", str(tmp_path / "plan.json")]) == 0
        warnings.append(json.loads((tmp_path / "plan.json").read_text())["warnings"])
    assert not any("extrapolating" in w for w in warnings[0])
    assert any("extrapolating beyond the fitted log: mean response 4096..4096 tokens" in w for w in warnings[1])
