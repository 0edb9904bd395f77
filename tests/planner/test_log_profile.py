"""``rlsim profile --from-log``: a profile fitted to verl / OpenRLHF metrics logs reproduces their step times.

The example logs in ``data/`` are synthetic (``data/make_framework_logs.py``: the frameworks' key names,
numbers from a seeded cost model with 2-10 % noise), so the fitted coefficients can be checked against
the model that made them as well as the simulated step times against the logged ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlsim.cli.main import main
from rlsim.errors import RlsimError
from rlsim.planner.profile.fitting.logs import LogLayout, fit_log_profile, plan_placement, replay_steps, step_trace
from rlsim.planner.profile.logs.frameworks import LoggedStep, read_framework_log
from rlsim.planner.profile.schema import load_profile

DATA = Path(__file__).resolve().parent / "data"
VERL = DATA / "verl_metrics.jsonl"
OPENRLHF = DATA / "openrlhf_metrics.jsonl"


@pytest.mark.parametrize(
    ("path", "name", "layout", "steps"),
    [
        (VERL, "verl", LogLayout(gpus=8, engine_gpus=1), 12),
        (OPENRLHF, "openrlhf", LogLayout(gpus=8, engine_gpus=2), 10),
    ],
)
def test_fitted_profile_reproduces_logged_step_times(path: Path, name: str, layout: LogLayout, steps: int) -> None:
    fmt, logged = read_framework_log(path)
    assert fmt.name == name and len(logged) == steps  # verl's validation record is skipped
    profile = fit_log_profile(fmt, logged, layout, "test", notes=[])
    simulated = replay_steps(profile, logged, layout)
    errors = sorted(abs(sim / s.step_s - 1.0) for sim, s in zip(simulated, logged, strict=True))
    # The logs carry 2 % noise per phase and 10 % on a ~1 s overhead: a right fit stays within a few %.
    assert errors[len(errors) // 2] < 0.025 and errors[-1] < 0.06, errors


def test_verl_fit_recovers_the_cost_model_that_wrote_the_log() -> None:
    fmt, logged = read_framework_log(VERL)
    profile = fit_log_profile(fmt, logged, LogLayout(gpus=8), "test", notes=[])
    gen, trainer, scorer = profile.generation, profile.trainer, profile.runtime("logged")
    assert gen is not None and trainer is not None
    # make_framework_logs.py: gen = 0.021 x longest + 4e-5 x (64 rollouts per engine x mean) + ...;
    # update = 25 + 1.4e-4 x tokens, plus old_log_prob 3e-5 and ref 2.5e-5 per token (trainer-side).
    assert gen.base_s == pytest.approx(0.021, rel=0.1)
    assert gen.per_seq_s == pytest.approx(4e-5, rel=0.25)
    assert trainer.update_s_per_token == pytest.approx(1.4e-4 + 5.5e-5, rel=0.1)
    assert trainer.sync_fixed_s + trainer.sync_s_per_token * 3e5 == pytest.approx(3.5, rel=0.05)
    assert scorer.per_padded_token_s == pytest.approx(1.1e-5, rel=0.15)


def test_step_trace_keeps_the_logged_mean_and_max() -> None:
    step = LoggedStep(
        line=1,
        rollouts=5,
        prompt_mean=10.4,
        response_mean=101.0,
        response_max=300.0,
        gen_s=1,
        score_s=1,
        update_s=1,
        sync_s=1,
        step_s=5,
    )
    prompts, responses = step_trace(step)
    assert prompts == [10] * 5 and responses[0] == 300 and sum(responses) == 505 and max(responses[1:]) <= 52


def test_cli_writes_a_profile_that_rlsim_plan_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile_path, summary = tmp_path / "verl.json", tmp_path / "summary.json"
    assert (
        main(
            [
                "profile",
                "--from-log",
                str(VERL),
                "--gpus",
                "8",
                "--gpu-model",
                "H100-SXM5-80GB",
                "--out",
                str(profile_path),
                "--summary",
                str(summary),
            ]
        )
        == 0
    )
    assert "median |error|" in capsys.readouterr().out
    profile = load_profile(profile_path)
    assert profile.hardware_kind == "from-log-verl" and profile.machine is not None
    doc = json.loads(summary.read_text())
    assert doc["max_abs_error"] < 0.06 and len(doc["simulated_step_s"]) == 12
    plan = {
        "nodes": {"count": 1, "cores": 64, "gpus": 8, "kind": "from-log-verl", "gpu_model": "H100"},
        "profiles": {"from-log-verl": str(profile_path)},
        "workload": {
            "prompts_per_step": 64,
            "group_size": 8,
            "prompt_tokens": {"kind": "fixed", "tokens": 180},
            "response_tokens": {"kind": "uniform", "min": 300, "max": 900},
        },
        "placement": plan_placement(512),
        "simulation": {"steps": 2},
    }
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    assert main(["plan", str(tmp_path / "plan.yaml"), "--out", str(tmp_path / "plan")]) == 0
    chosen = json.loads((tmp_path / "plan" / "plan.json").read_text())["chosen"]
    logged = [s.step_s for s in read_framework_log(VERL)[1]]
    assert min(logged) * 0.8 < chosen["step_time_s"] < max(logged) * 1.2  # a workload like the logged one


def test_unknown_format_lists_the_accepted_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "other.jsonl"
    log.write_text('{"loss": 1.0, "time/step": 3.0}\n')
    with pytest.raises(RlsimError, match="unknown log format") as err:
        read_framework_log(log)
    assert "verl (keys timing_s/gen" in str(err.value) and "openrlhf (keys timing/generation" in str(err.value)
    assert main(["profile", "--from-log", str(log), "--out", str(tmp_path / "p.json")]) == 2
    assert "Accepted formats" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_missing_keys_are_named_per_line(tmp_path: Path) -> None:
    lines = VERL.read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["data"]["timing_s/update_weights"], broken["data"]["perf/total_num_tokens"]
    lines[1] = json.dumps(broken)
    log = tmp_path / "verl.jsonl"
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(RlsimError) as err:
        read_framework_log(log)
    # timing_s/update_weights is optional (verl logs it from 0.7.1); the token count is not.
    assert str(err.value).startswith(f"{log} line 2: perf/total_num_tokens is missing")
    assert "\n" not in str(err.value)


def test_not_jsonl_and_too_few_steps_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("step 1 gen 3.0\n")
    with pytest.raises(RlsimError, match="not a log rlsim reads.*verl's file logger JSONL"):
        read_framework_log(bad)
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(OPENRLHF.read_text().splitlines()[:2]) + "\n")
    fmt, steps = read_framework_log(short)
    with pytest.raises(RlsimError, match="needs 3 or more steps"):
        fit_log_profile(fmt, steps, LogLayout(), "test", notes=[])
