"""``schedule: async``: its settings, and a bad async config refused with every problem at once, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlsim.errors import ConfigError
from rlsim.loop.config import RunConfig, cross_field_problems, load_run_config

WORKLOAD = {"prompts_per_step": 4, "group_size": 2}  # one batch = 8 rollouts


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_async_settings_load_under_the_async_key(tmp_path: Path) -> None:
    data = {
        "schedule": "async",
        "workload": WORKLOAD,
        "policy": {"backend": "vllm"},
        "async": {"max_staleness": 2, "queue_size": 16, "is_cap": 3.0},
    }
    config = load_run_config(write(tmp_path, data), ["async.max_staleness=0"])
    assert config.schedule == "async"
    assert (config.async_.max_staleness, config.async_.queue_size, config.async_.is_cap) == (0, 16, 3.0)
    assert config.async_.partial_rollouts is False


def test_queue_size_defaults_to_one_batch_per_allowed_version_plus_one() -> None:
    config = RunConfig.model_validate({"schedule": "async", "workload": WORKLOAD, "async": {"max_staleness": 2}})
    assert config.async_.resolved_queue_size(8) == 24  # (2 + 1) x 8


def test_every_async_problem_is_listed_in_one_error_and_nothing_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlsim.cli.main import main

    bad = {
        "schedule": "async",
        "workload": WORKLOAD,
        "policy": {"backend": "hf"},
        "async": {"max_staleness": -1, "queue_size": 7, "is_cap": 0.5},
    }
    with pytest.raises(ConfigError) as err:
        load_run_config(write(tmp_path, bad))
    where = sorted(e.split(":")[0] for e in err.value.errors)
    assert where == ["async.is_cap", "async.max_staleness", "async.queue_size", "policy.backend"]
    text = "\n".join(err.value.errors)
    assert "at least 8" in text  # the batch: 4 prompts x 2 samples
    assert "hf backend cannot report them" in text and "use vllm" in text
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, bad)), "--out", str(out)]) == 2
    assert "4 error(s)" in capsys.readouterr().err
    assert not out.exists()


def test_async_problems_join_the_other_cross_field_problems() -> None:
    config = RunConfig.model_validate(
        {
            "schedule": "async",
            "workload": WORKLOAD,
            "policy": {"max_model_len": 64, "backend": "hf"},
            "trainer": {"sync": "simulated"},
            "async": {"partial_rollouts": True},
        }
    )
    problems = cross_field_problems(config)
    assert any("max_model_len" in p for p in problems)
    partial = [p for p in problems if p.startswith("async.partial_rollouts: ")]
    assert len(partial) == 2  # the hf backend cannot swap weights mid-generation; a simulated sync has none
    assert any("hf backend cannot load new weights between its engine steps; use vllm" in p for p in partial)
    assert any("trainer.sync simulated" in p for p in partial)


def test_partial_rollouts_on_vllm_with_a_reload_are_accepted() -> None:
    config = RunConfig.model_validate(
        {"schedule": "async", "workload": WORKLOAD, "policy": {"backend": "vllm"}, "async": {"partial_rollouts": True}}
    )
    assert cross_field_problems(config) == []


@pytest.mark.parametrize("extra", [{"trainer": {"algorithm": "ppo"}}, {"kl": {"coef": 0.05}}])
def test_async_refuses_ppo_and_a_kl_reference_before_anything_starts(extra: dict) -> None:
    config = RunConfig.model_validate({"schedule": "async", "workload": WORKLOAD, **extra})
    problems = cross_field_problems(config)
    assert any(p.startswith("schedule: async trains without a critic or a reference") for p in problems)
    assert not any(
        "critic or a reference" in p for p in cross_field_problems(config.model_copy(update={"schedule": "overlapped"}))
    )


def test_async_settings_are_ignored_by_the_other_schedules() -> None:
    config = RunConfig.model_validate(
        {"schedule": "overlapped", "policy": {"backend": "hf"}, "async": {"max_staleness": -1}}
    )
    assert cross_field_problems(config) == []


def test_a_config_dump_loads_back() -> None:
    config = RunConfig.model_validate({"schedule": "async", "async": {"max_staleness": 3}})
    dumped = config.model_dump(mode="json")
    assert dumped["async"]["max_staleness"] == 3  # results.json records it under the YAML key
    again = RunConfig.model_validate(dumped)
    assert again.async_.max_staleness == 3
