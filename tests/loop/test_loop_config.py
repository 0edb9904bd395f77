"""The run config: shipped YAMLs load, bad configs list every problem, and a bad config starts nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from rlsim.errors import ConfigError
from rlsim.loop.config import RunConfig, cross_field_problems, load_run_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
LOOP_CONFIGS = [
    "default.yaml",
    "sequential.yaml",
    "overlapped.yaml",
    "gpu_example.yaml",
    "async.yaml",
    "reward_remote.yaml",
]


@pytest.mark.parametrize("name", LOOP_CONFIGS)
def test_shipped_configs_load_and_open_with_the_command_that_runs_them(name: str) -> None:
    config = load_run_config(CONFIGS / name)
    assert isinstance(config, RunConfig)
    head = (CONFIGS / name).read_text().splitlines()[:4]
    assert any(f"rlsim run configs/{name}" in line for line in head)
    assert any("--set" in line for line in head)


def test_sequential_and_overlapped_differ_only_in_schedule() -> None:
    seq = load_run_config(CONFIGS / "sequential.yaml").model_dump()
    ovl = load_run_config(CONFIGS / "overlapped.yaml").model_dump()
    diff = {k for k in seq if seq[k] != ovl[k]}
    assert diff == {"schedule"}


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_every_field_error_is_listed_at_once(tmp_path: Path) -> None:
    bad = {
        "steps": 0,
        "schedule": "pipelined",
        "polcy": {},
        "reward": {"runtime": "onnx", "replicas": 0},
        "workload": {"group_size": 1},
    }
    with pytest.raises(ConfigError) as err:
        load_run_config(write(tmp_path, bad))
    where = {e.split(":")[0] for e in err.value.errors}
    assert where == {"steps", "schedule", "polcy", "reward.runtime", "reward.replicas", "workload.group_size"}


def test_cross_field_problems_are_listed_together() -> None:
    config = RunConfig.model_validate(
        {
            "policy": {"max_model_len": 64},
            "reward": {"batcher": "token-budget"},
            "placement": {"trainer": {"gpu": 0.5}, "scorer": {"cores": [0], "threads": 2}},
        }
    )
    problems = cross_field_problems(config)
    assert len(problems) == 4
    text = "\n".join(problems)
    for needle in ("max_model_len", "token_budget", "placement.trainer.gpu", "placement.scorer.threads"):
        assert needle in text


def test_http_server_faults_need_the_http_runtime_and_one_fault_per_step() -> None:
    faults = {"kill_scorer_steps": [2], "kill_http_server_steps": [2, 3], "stall_http_server_steps": [3]}
    problems = cross_field_problems(RunConfig.model_validate({"reward": {"runtime": "eager"}, "faults": faults}))
    text = "\n".join(problems)
    assert "faults.kill_http_server_steps: http server faults need reward.runtime: http" in text
    assert "step 2 is in both kill_scorer_steps and kill_http_server_steps" in text
    assert "step 3 is in both kill_http_server_steps and stall_http_server_steps" in text
    ok = {"reward": {"runtime": "http"}, "faults": {"kill_http_server_steps": [2], "stall_http_server_steps": [3]}}
    assert cross_field_problems(RunConfig.model_validate(ok)) == []


def test_the_http_server_wraps_a_known_runtime_other_than_http(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_run_config(write(tmp_path, {"reward": {"runtime": "http", "server_runtime": "http"}}))
    assert any("reward.server_runtime" in e and "eager" in e for e in err.value.errors)


def test_cores_this_machine_lacks_are_refused_for_a_local_run() -> None:
    missing = max(os.sched_getaffinity(0)) + 100
    config = RunConfig.model_validate({"placement": {"rollout": {"cores": [missing]}}})
    assert any("not available here" in p for p in cross_field_problems(config))
    remote = RunConfig.model_validate({"placement": {"rollout": {"cores": [missing]}}, "ray": {"address": "auto"}})
    assert cross_field_problems(remote) == []  # the actor checks on its own node


def test_split_needs_two_cores() -> None:
    config = RunConfig.model_validate({"placement": {"preset": "split", "pool": [0]}})
    assert any("split needs at least 2 cores" in p for p in cross_field_problems(config))


def test_overrides_apply_and_are_validated(tmp_path: Path) -> None:
    path = CONFIGS / "default.yaml"
    config = load_run_config(path, ["steps=5", "placement.preset=split", "reward.runtime=eager"])
    assert (config.steps, config.placement.preset, config.reward.runtime) == (5, "split", "eager")
    with pytest.raises(ConfigError, match="micro_batch"):
        load_run_config(path, ["micro_batch=0"])


def test_rlsim_run_with_a_bad_config_exits_2_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlsim.cli.main import main

    out = tmp_path / "out"
    rc = main(["run", str(write(tmp_path, {"steps": -1, "bogus": True})), "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "2 error(s)" in err and "steps" in err and "bogus" in err
    assert not out.exists()
