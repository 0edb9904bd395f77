"""The algorithm sections of the run config: defaults keep GRPO, bad values are listed together."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlsim.errors import ConfigError
from rlsim.loop.config import RunConfig, cross_field_problems, load_run_config
from rlsim.loop.config.algorithm import algorithm_settings, critic_settings, reference_settings

PPO = Path(__file__).resolve().parents[2] / "configs" / "ppo.yaml"


def test_defaults_are_grpo_without_kl() -> None:
    s = algorithm_settings(RunConfig())
    assert (s.algorithm, s.kl_coef, s.uses_reference, s.uses_critic) == ("grpo", 0.0, False, False)


def test_ppo_yaml_opens_with_its_command_and_maps_to_settings() -> None:
    head = PPO.read_text().splitlines()[:5]
    assert any("rlsim run configs/ppo.yaml" in line for line in head) and any("--set" in line for line in head)
    config = RunConfig.model_validate(yaml.safe_load(PPO.read_text()))
    s = algorithm_settings(config)
    got = (s.algorithm, s.gamma, s.lam, s.kl_coef, s.kl_estimator, s.kl_target)
    assert got == ("ppo", 1.0, 0.95, 0.05, "k3", "reward")
    assert critic_settings(config).value_clip == 0.2 and critic_settings(config).lr == 1e-5
    assert reference_settings(config).runtime == "ort"


def test_ppo_yaml_loads_without_a_problem() -> None:
    config = load_run_config(PPO)  # the loop runs the reference and critic as actors now
    assert config.trainer.algorithm == "ppo" and config.kl.coef > 0


def test_every_algorithm_field_error_is_listed_at_once(tmp_path: Path) -> None:
    bad = {
        "trainer": {"algorithm": "dpo", "gamma": 1.5, "lam": -0.1, "value_clip": 0, "critic_lr": 0},
        "kl": {"coef": -0.1, "estimator": "k4", "target": "value"},
        "reference": {"runtime": "compile"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError) as err:
        load_run_config(path)
    where = {e.split(":")[0] for e in err.value.errors}
    assert where == {
        "trainer.algorithm",
        "trainer.gamma",
        "trainer.lam",
        "trainer.value_clip",
        "trainer.critic_lr",
        "kl.coef",
        "kl.estimator",
        "kl.target",
        "reference.runtime",
    }


def test_cross_field_rules_are_listed_together(tmp_path: Path) -> None:
    # A critic of 16 positions cannot read prompt + response (the default workload reaches 224), and the
    # native reference cannot give per-token log-probs: both problems at once, with the loop's.
    critic = tmp_path / "short-critic"
    critic.mkdir()
    (critic / "config.json").write_text('{"model_type": "llama", "max_position_embeddings": 16}')
    config = RunConfig.model_validate(
        {
            "trainer": {"algorithm": "ppo"},
            "kl": {"coef": 0.1},
            "reference": {"runtime": "native"},
            "critic": {"model": str(critic)},
        }
    )
    text = "\n".join(cross_field_problems(config))
    assert "critic.model" in text and "reads at most 16 tokens" in text and "reach 224" in text
    assert "reference.runtime" in text and "one float per sequence" in text
    missing = RunConfig.model_validate({"trainer": {"algorithm": "ppo"}, "critic": {"model": str(tmp_path / "nope")}})
    assert any("critic.model" in p and "config.json" in p for p in cross_field_problems(missing))


def test_rloo_without_kl_needs_no_new_role() -> None:
    assert cross_field_problems(RunConfig.model_validate({"trainer": {"algorithm": "rloo"}})) == []
