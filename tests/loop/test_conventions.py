"""trainer.conventions: each preset's values, key-by-key overrides, the record in results.json, bad input
as config errors, and each preset reproducing a small example worked by hand from its framework's formula."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rlsim.algorithms.actor_loss import SurrogateSettings, actor_loss
from rlsim.algorithms.advantages import group_advantages
from rlsim.algorithms.kl import kl_per_token
from rlsim.errors import ConfigError
from rlsim.loop.config import RunConfig, load_run_config
from rlsim.loop.config.algorithm import algorithm_settings
from rlsim.loop.config.conventions import CONVENTION_KEYS, TABLE, resolved_conventions
from rlsim.loop.roles.build import loss_scale
from rlsim.loop.run import RunOutputs


def config(**sections: dict) -> RunConfig:
    return RunConfig.model_validate(sections)


def value(c: RunConfig, path: str) -> object:
    section, key = path.split(".")
    return c.model_dump(by_alias=True)[section][key]


def test_the_rlsim_preset_is_the_config_defaults() -> None:
    c = RunConfig()
    assert c.trainer.conventions == "rlsim"
    for path in CONVENTION_KEYS:
        assert value(c, path) == TABLE["rlsim"][path].value, path
    record = resolved_conventions(c)
    assert record["preset"] == "rlsim" and "override" not in json.dumps(record)


def test_each_framework_preset_sets_its_defaults() -> None:
    verl = config(trainer={"conventions": "verl"})
    assert (verl.trainer.dual_clip, verl.trainer.log_ratio_clamp, verl.trainer.std_ddof) == (3.0, 20.0, 1)
    assert (verl.trainer.group_of_one, verl.trainer.lam, verl.trainer.value_clip) == ("reward", 1.0, 0.5)
    assert (verl.kl.estimator, verl.kl.clamp, verl.kl.log_ratio_clamp) == ("k3", 10.0, 20.0)  # the loss's k3
    orl = config(trainer={"conventions": "openrlhf"})
    assert (orl.trainer.dual_clip, orl.trainer.std_eps, orl.kl.estimator, orl.kl.clamp) == (None, 1e-9, "k1", 10.0)
    assert (orl.kl.log_ratio_clamp, orl.async_.is_cap, orl.async_.is_floor) == (None, 5.0, 0.5)
    trl = config(trainer={"conventions": "trl"})
    assert (trl.trainer.std_ddof, trl.trainer.std_eps, trl.kl.estimator, trl.kl.clamp) == (1, 1e-4, "k3", None)
    assert (trl.kl.log_ratio_clamp, trl.async_.is_cap, trl.trainer.value_clip) == (None, 3.0, 0.2)
    # TRL's vllm_importance_sampling_mode defaults to sequence_mask; the others truncate per token.
    assert (trl.async_.is_level, trl.async_.is_mode, trl.trainer.delta_clip) == ("sequence", "mask", None)
    for other in (verl, orl, RunConfig()):
        assert (other.async_.is_level, other.async_.is_mode, other.trainer.delta_clip) == ("token", "truncate", None)


def test_the_trl_preset_reaches_the_trainer_and_masks_a_drifted_sequence() -> None:
    from rlsim.algorithms.off_policy import IsCorrection, importance_weights
    from rlsim.loop.roles.build import trainer_settings
    from rlsim.placement import ResolvedPlacement

    c = config(schedule="async", trainer={"conventions": "trl"}, async_={"is_floor": 0.5})  # type: ignore[arg-type]
    s = trainer_settings(c, ResolvedPlacement(cores=(0,), threads=1))
    assert (s.is_cap, s.is_floor, s.is_level, s.is_mode, s.delta_clip) == (3.0, 0.5, "sequence", "mask", None)
    assert s.is_cap is not None  # for mypy: schedule async sets it
    # Three tokens at ratio 1.5, each inside [0.5, 3]: their product 3.375 leaves it, so TRL drops the
    # rollout (weight 0 for all three) where rlsim's default keeps each token at 1.5.
    proximal, behaviour = np.log(np.full(3, 0.6, np.float32)), np.log(np.full(3, 0.4, np.float32))
    trl = importance_weights(proximal, behaviour, IsCorrection(s.is_cap, s.is_floor, s.is_level, s.is_mode))[0]
    assert trl.tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(importance_weights(proximal, behaviour, IsCorrection(3.0))[0], [1.5] * 3, rtol=1e-6)


def test_bad_delta_clip_values_are_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    for delta in (1.0, 0.5, 0.0, -2.0):
        with pytest.raises(ConfigError, match="trainer.delta_clip: Input should be greater than 1"):
            load_run_config(_write(path, {"trainer": {"delta_clip": delta}}))
    # Above 1 but not above 1 + the upper clip (0.28 here): it would move the positive side's clip.
    with pytest.raises(ConfigError, match=r"trainer.delta_clip: 1.25 must be above 1 \+ the upper clip \(1.28\)"):
        load_run_config(_write(path, {"trainer": {"delta_clip": 1.25, "clip_eps_high": 0.28}}))
    with pytest.raises(ConfigError, match=r"trainer.delta_clip: 1.2 must be above 1 \+ the upper clip \(1.2\)"):
        load_run_config(_write(path, {"trainer": {"delta_clip": 1.2}}))  # clip_eps 0.2, symmetric
    assert load_run_config(_write(path, {"trainer": {"delta_clip": 1.3, "clip_eps_high": 0.28}})).trainer.delta_clip


def test_bad_off_policy_values_are_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    with pytest.raises(ConfigError) as err:
        load_run_config(_write(path, {"async": {"is_level": "geometric", "is_mode": "reject"}}))
    assert {e.split(":")[0] for e in err.value.errors} == {"async.is_level", "async.is_mode"}
    text = "\n".join(err.value.errors)
    assert "'token' or 'sequence'" in text and "'truncate' or 'mask'" in text  # the valid values are named
    # Bounds: a floor of 0 or below, and a floor equal to the cap (both 1), are refused.
    for floor in (0.0, -0.5):
        with pytest.raises(ConfigError, match=r"async.is_floor: .* must lie in \(0, 1\]"):
            load_run_config(_write(path, {"async": {"is_floor": floor, "is_mode": "mask"}}))
    with pytest.raises(ConfigError, match=r"async.is_floor: 1.0 must lie below async.is_cap \(1.0\)"):
        load_run_config(_write(path, {"async": {"is_floor": 1.0, "is_cap": 1.0, "is_mode": "mask"}}))
    # A cap of 0 or below is refused where it is used (schedule async), as before.
    with pytest.raises(ConfigError, match="async.is_cap: 0.0 is below 1"):
        load_run_config(_write(path, {"schedule": "async", "policy": {"backend": "vllm"}, "async": {"is_cap": 0}}))


def test_per_target_rules_follow_the_kl_target_and_estimator() -> None:
    # verl: k1 for the KL in the reward (algorithm.kl_penalty: kl) and no clamp on it; k3 clamped in the loss.
    reward = config(trainer={"conventions": "verl"}, kl={"target": "reward"})
    assert (reward.kl.estimator, reward.kl.clamp) == ("k1", None)
    chosen = config(trainer={"conventions": "verl"}, kl={"target": "reward", "estimator": "k3"})
    assert (chosen.kl.estimator, chosen.kl.clamp) == ("k3", 10.0)  # verl clamps every k3


def test_the_openrlhf_preset_puts_the_kl_in_the_reward_per_token_and_an_override_wins() -> None:
    orl = config(trainer={"conventions": "openrlhf"}, kl={"coef": 0.1, "target": "reward"})
    assert orl.kl.reward_form == "token" and algorithm_settings(orl).kl_reward_form == "token"
    assert resolved_conventions(orl)["values"]["kl.reward_form"]["source"].startswith("OpenRLHF/OpenRLHF@3c3be62: ")
    kl = {"coef": 0.1, "target": "reward", "reward_form": "sequence"}
    chosen = config(trainer={"conventions": "openrlhf"}, kl=kl)
    assert algorithm_settings(chosen).kl_reward_form == "sequence"
    assert resolved_conventions(chosen)["values"]["kl.reward_form"] == {"value": "sequence", "source": "override"}
    for preset in ("rlsim", "verl", "trl"):  # verl's apply_kl_penalty form; TRL's RLOO sums the KL the same way
        assert config(trainer={"conventions": preset}, kl={"target": "reward"}).kl.reward_form == "sequence"


def test_a_preset_is_overridden_key_by_key_and_results_json_records_it(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"trainer": {"conventions": "verl", "dual_clip": None}}))
    c = load_run_config(path, ["kl.clamp=5", "trainer.std_eps=0.001"])
    assert (c.trainer.dual_clip, c.kl.clamp, c.trainer.std_eps, c.trainer.std_ddof) == (None, 5.0, 0.001, 1)
    RunOutputs(tmp_path / "out", c)
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    values = saved["conventions"]["values"]
    assert saved["conventions"]["preset"] == "verl" and saved["config"]["trainer"]["dual_clip"] is None
    assert values["trainer.dual_clip"] == {"value": None, "source": "override"}
    assert values["kl.clamp"]["source"] == "override" and values["trainer.std_eps"]["value"] == 0.001
    assert values["trainer.std_ddof"] == {
        "value": 1,
        "source": "volcengine/verl@b178a3c: verl/trainer/ppo/core_algos.py compute_grpo_outcome_advantage (torch.std)",
    }
    assert RunConfig.model_validate(saved["config"]) == c  # the recorded config reloads to the same run


def test_bad_convention_values_are_config_errors_listed_together(tmp_path: Path) -> None:
    bad = {
        "trainer": {"conventions": "deepspeed", "std_ddof": 2, "dual_clip": 0.5, "loss_agg": "sum", "std_eps": -1},
        "kl": {"clamp": -10, "log_ratio_clamp": 0, "estimator": "k4", "reward_form": "per-token"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError) as err:
        load_run_config(path)
    text = "\n".join(err.value.errors)
    assert "'rlsim', 'verl', 'openrlhf' or 'trl'" in text  # the valid presets are named
    where = {e.split(":")[0] for e in err.value.errors}
    assert where == {
        "trainer.conventions",
        "trainer.std_ddof",
        "trainer.dual_clip",
        "trainer.loss_agg",
        "trainer.std_eps",
        "kl.clamp",
        "kl.log_ratio_clamp",
        "kl.estimator",
        "kl.reward_form",
    }
    assert "'sequence' or 'token'" in text  # the valid reward forms are named
    # The default batch is 8 prompts x 4 samples = 32 rollouts: 5 does not divide it.
    path.write_text(yaml.safe_dump({"trainer": {"loss_scale": 512, "mini_batch_size": 5}, "async": {"is_floor": 2.0}}))
    with pytest.raises(ConfigError) as err:
        load_run_config(path)
    assert {e.split(":")[0] for e in err.value.errors} == {
        "trainer.loss_scale",
        "trainer.mini_batch_size",
        "async.is_floor",
    }
    assert any("do not divide the batch of 32" in e for e in err.value.errors)
    assert load_run_config(_write(path, {"trainer": {"mini_batch_size": 8}})).trainer.mini_batch_size == 8
    with pytest.raises(ConfigError, match="adaptive needs kl.target_kl"):
        load_run_config(_write(path, {"kl": {"coef": 0.1, "controller": "adaptive"}}))
    verl = load_run_config(
        _write(path, {"trainer": {"conventions": "verl"}, "kl": {"coef": 0.1, "controller": "adaptive"}})
    )
    assert algorithm_settings(verl).kl_target_value == 0.1  # verl's kl_ctrl.target_kl


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_dr_grpo_scale_defaults_to_the_longest_response() -> None:
    c = config(trainer={"loss_agg": "seq-mean-token-sum-norm"})
    assert loss_scale(c) == 192.0  # the default workload's response maximum
    assert loss_scale(config(trainer={"loss_agg": "seq-mean-token-sum-norm", "loss_scale": 64})) == 64.0
    assert loss_scale(RunConfig()) is None


# Each preset on three worked examples, from its framework's formula:
# - GRPO group 0, 0, 0, 1: the last sample's advantage 0.75 / (std + eps), std population sqrt(0.1875) or
#   unbiased 0.5;
# - the KL tail in the loss, logp -9 against ref -0.5: k3 = e^8.5 - 9.5 = 4905.3 unclamped, k1 = -8.5;
# - one token with ratio 5 and advantage -1: PPO's loss max(5, 0.8) = 5, verl's dual clip min(5, 3) = 3.
HAND = {
    "rlsim": (0.75 / (math.sqrt(0.1875) + 1e-6), math.exp(8.5) - 9.5, 5.0),
    "verl": (0.75 / (0.5 + 1e-6), 10.0, 3.0),  # low_var_kl clamped to [-10, 10]; clip_ratio_c 3
    "openrlhf": (0.75 / (0.5 + 1e-9), -8.5, 5.0),  # k1, within its [-10, 10] clamp
    "trl": (0.75 / (0.5 + 1e-4), math.exp(8.5) - 9.5, 5.0),
}


@pytest.mark.parametrize("preset", sorted(HAND))
def test_each_preset_reproduces_its_frameworks_worked_example(preset: str) -> None:
    c = config(trainer={"conventions": preset}, kl={"coef": 0.1, "target": "loss"})
    alg = algorithm_settings(c)
    adv, kl_tail, loss = HAND[preset]
    got = group_advantages([0] * 4, [0.0, 0.0, 0.0, 1.0], alg.normalize_std, alg.std_eps, alg.std_ddof)
    assert float(got[3]) == pytest.approx(adv, rel=1e-5)
    k = kl_per_token(
        torch.tensor([-9.0], dtype=torch.float64),
        torch.tensor([-0.5], dtype=torch.float64),
        alg.kl_estimator,
        alg.kl_log_ratio_clamp,
        alg.kl_clamp,
    )
    assert float(k) == pytest.approx(kl_tail, rel=1e-9)
    t = c.trainer
    s = SurrogateSettings(t.clip_eps, t.clip_eps_high, t.dual_clip, t.log_ratio_clamp, t.loss_agg, loss_scale(c))
    z = torch.zeros(1)
    out = actor_loss(torch.log(torch.tensor([5.0])), z, -torch.ones(1), [1], (1, 1), s, alg, z)
    assert float(out.policy_loss) == pytest.approx(loss, rel=1e-6)
    assert np.isfinite(float(out.loss))


def test_the_docs_table_names_every_key_and_every_source() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "conventions.md").read_text()
    rows = {line.split("|")[1].strip(" `") for line in text.splitlines() if line.startswith("| `")}
    assert set(CONVENTION_KEYS) <= rows
    for preset in ("verl", "openrlhf", "trl"):
        for path, entry in TABLE[preset].items():
            assert f"- `{path}`: {entry.source}" in text, (preset, path)
