"""``trainer.conventions``: the step as rlsim, verl, OpenRLHF or TRL computes it by default.

A preset fills every convention key the config does not set itself, so it is a starting point that
any key overrides (``trainer.conventions: verl`` with ``trainer.dual_clip: null`` is verl without dual
clip). The resolved values are what the run config holds, hence what ``results.json`` records
(``config``, and ``conventions``: each key's value and where it came from).

Each value was read from the framework's source at the commit named in ``SOURCES`` (its file and
the setting or function are cited per value); docs/conventions.md tables them. Values that depend on
another setting are rules: verl and TRL use a different KL estimator for the KL in the reward (k1)
than for the KL in the loss (k3), and verl clamps only its k3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from rlsim.algorithms.aggregation import LossAggregation

Preset = Literal["rlsim", "verl", "openrlhf", "trl"]
PRESETS: tuple[str, ...] = get_args(Preset)

# The commits the values were read at (volcengine/verl, OpenRLHF/OpenRLHF, huggingface/trl).
SOURCES = {
    "verl": "volcengine/verl@b178a3c",
    "openrlhf": "OpenRLHF/OpenRLHF@3c3be62",
    "trl": "huggingface/trl@f2cd577",
}


@dataclass(frozen=True)
class Entry:
    """One preset value: a constant, or a rule of the raw config (``value(data)``), and its source."""

    value: Any
    source: str

    def resolve(self, data: Mapping[str, Any]) -> Any:
        return self.value(data) if callable(self.value) else self.value


def _kl_target(data: Mapping[str, Any]) -> str:
    return str(_section(data, "kl").get("target", "loss"))


def _per_target(reward: str, loss: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda data: reward if _kl_target(data) == "reward" else loss


def _verl_kl_clamp(data: Mapping[str, Any]) -> float | None:
    kl = _section(data, "kl")
    estimator = kl.get("estimator", "k1" if _kl_target(data) == "reward" else "k3")
    return 10.0 if estimator in ("k3", "k3+") else None


_VERL_ACTOR = "verl/trainer/config/actor/actor.yaml"
_VERL_ALGOS = "verl/trainer/ppo/core_algos.py"
_ORLHF_CLI = "openrlhf/cli/train_ppo_ray.py"
_ORLHF_ADV = "openrlhf/trainer/ppo_utils/experience_maker.py compute_advantages_and_returns"
_TRL_GRPO = "trl/trainer/grpo_config.py"
_TRL_LOSS = "trl/trainer/grpo_trainer.py _compute_loss"
_VERL_IS = "verl/trainer/config/algorithm/rollout_correction.yaml"
_VERL_IS_CODE = "verl/trainer/ppo/rollout_corr_helper.py compute_rollout_correction_weights"

# Keys are the config's dotted paths; rlsim's column is the config's own defaults.
TABLE: dict[str, dict[str, Entry]] = {
    "rlsim": {
        "trainer.clip_eps": Entry(0.2, "rlsim default"),
        "trainer.clip_eps_high": Entry(None, "rlsim default (symmetric)"),
        "trainer.dual_clip": Entry(None, "rlsim default (off)"),
        "trainer.delta_clip": Entry(None, "rlsim default (off)"),
        "trainer.log_ratio_clamp": Entry(None, "rlsim default (off)"),
        "trainer.loss_agg": Entry("token-mean", "rlsim default"),
        "trainer.std_ddof": Entry(0, "rlsim default (population std)"),
        "trainer.std_eps": Entry(1e-6, "rlsim default"),
        "trainer.group_of_one": Entry("zero", "rlsim default"),
        "trainer.epochs": Entry(1, "rlsim default"),
        "trainer.gamma": Entry(1.0, "rlsim default"),
        "trainer.lam": Entry(0.95, "rlsim default"),
        "trainer.value_clip": Entry(0.2, "rlsim default"),
        "kl.estimator": Entry("k3", "rlsim default (both targets)"),
        "kl.log_ratio_clamp": Entry(20.0, "rlsim default (k3's log r)"),
        "kl.clamp": Entry(None, "rlsim default (off)"),
        "kl.controller": Entry("fixed", "rlsim default"),
        "kl.horizon": Entry(10000, "rlsim default (used when adaptive)"),
        "kl.target_kl": Entry(None, "rlsim default (set it for adaptive)"),
        "kl.reward_form": Entry("sequence", "rlsim default (verl's form)"),
        "async.is_cap": Entry(2.0, "rlsim default"),
        "async.is_floor": Entry(None, "rlsim default (off)"),
        "async.is_level": Entry("token", "rlsim default"),
        "async.is_mode": Entry("truncate", "rlsim default"),
    },
    "verl": {
        "trainer.clip_eps": Entry(0.2, f"{_VERL_ACTOR} clip_ratio_low"),
        "trainer.clip_eps_high": Entry(0.2, f"{_VERL_ACTOR} clip_ratio_high"),
        "trainer.dual_clip": Entry(3.0, f"{_VERL_ACTOR} clip_ratio_c (applied in compute_policy_loss_vanilla)"),
        "trainer.delta_clip": Entry(None, f"{_VERL_ALGOS} compute_policy_loss_vanilla (no such clip)"),
        "trainer.log_ratio_clamp": Entry(20.0, f"{_VERL_ALGOS} compute_policy_loss_vanilla"),
        "trainer.loss_agg": Entry("token-mean", f"{_VERL_ACTOR} loss_agg_mode"),
        "trainer.std_ddof": Entry(1, f"{_VERL_ALGOS} compute_grpo_outcome_advantage (torch.std)"),
        "trainer.std_eps": Entry(1e-6, f"{_VERL_ALGOS} compute_grpo_outcome_advantage epsilon"),
        "trainer.group_of_one": Entry("reward", f"{_VERL_ALGOS} compute_grpo_outcome_advantage (mean 0, std 1)"),
        "trainer.epochs": Entry(1, f"{_VERL_ACTOR} ppo_epochs"),
        "trainer.gamma": Entry(1.0, "verl/trainer/config/ppo_trainer.yaml algorithm.gamma"),
        "trainer.lam": Entry(1.0, "verl/trainer/config/ppo_trainer.yaml algorithm.lam"),
        "trainer.value_clip": Entry(0.5, "verl/trainer/config/critic/critic.yaml cliprange_value"),
        "kl.estimator": Entry(
            _per_target("k1", "k3"),
            "reward: verl/trainer/config/ppo_trainer.yaml algorithm.kl_penalty (kl); "
            f"loss: {_VERL_ACTOR} kl_loss_type (low_var_kl)",
        ),
        "kl.log_ratio_clamp": Entry(20.0, f"{_VERL_ALGOS} kl_penalty_forward"),
        "kl.clamp": Entry(_verl_kl_clamp, f"{_VERL_ALGOS} kl_penalty_forward (k3 only)"),
        "kl.controller": Entry("fixed", "verl/trainer/config/ppo_trainer.yaml algorithm.kl_ctrl.type"),
        "kl.horizon": Entry(10000, "verl/trainer/config/ppo_trainer.yaml algorithm.kl_ctrl.horizon"),
        "kl.target_kl": Entry(0.1, "verl/trainer/config/ppo_trainer.yaml algorithm.kl_ctrl.target_kl"),
        "kl.reward_form": Entry(
            "sequence",
            "verl/trainer/ppo/ray_trainer.py apply_kl_penalty, then "
            f"{_VERL_ALGOS} compute_grpo_outcome_advantage / compute_rloo_outcome_advantage sum the token rewards",
        ),
        "async.is_cap": Entry(2.0, f"{_VERL_IS} rollout_is_threshold"),
        "async.is_floor": Entry(None, f"{_VERL_IS} (upper only)"),
        "async.is_level": Entry("token", f"{_VERL_IS} rollout_is (null: off; token or sequence when set)"),
        "async.is_mode": Entry("truncate", f"{_VERL_IS_CODE} (clamp at the threshold; rollout_rs null: no rejection)"),
    },
    "openrlhf": {
        "trainer.clip_eps": Entry(0.2, f"{_ORLHF_CLI} --actor.eps_clip"),
        "trainer.clip_eps_high": Entry(0.2, f"{_ORLHF_CLI} --actor.eps_clip_low_high (default: eps_clip)"),
        "trainer.dual_clip": Entry(None, f"{_ORLHF_CLI} --actor.dual_clip"),
        "trainer.delta_clip": Entry(None, "openrlhf/models/loss.py PolicyLoss (no such clip)"),
        "trainer.log_ratio_clamp": Entry(20.0, "openrlhf/models/loss.py PolicyLoss"),
        "trainer.loss_agg": Entry("token-mean", "openrlhf/models/loss.py PolicyLoss token_level_loss"),
        "trainer.std_ddof": Entry(1, "openrlhf/trainer/ppo_utils/experience_maker.py group_norm (torch.std)"),
        "trainer.std_eps": Entry(1e-9, "openrlhf/trainer/ppo_utils/experience_maker.py group_norm"),
        "trainer.group_of_one": Entry("zero", f"{_ORLHF_CLI} (refuses n_samples_per_prompt 1)"),
        "trainer.epochs": Entry(1, f"{_ORLHF_CLI} --train.max_epochs"),
        "trainer.gamma": Entry(1.0, f"{_ORLHF_CLI} --algo.advantage.gamma"),
        "trainer.lam": Entry(1.0, f"{_ORLHF_CLI} --algo.advantage.lambd"),
        "trainer.value_clip": Entry(0.5, f"{_ORLHF_CLI} --critic.value_clip"),
        "kl.estimator": Entry("k1", f"{_ORLHF_CLI} --algo.kl.estimator"),
        "kl.log_ratio_clamp": Entry(None, "openrlhf/models/utils.py compute_approx_kl"),
        "kl.clamp": Entry(10.0, "openrlhf/models/utils.py compute_approx_kl (every estimator)"),
        "kl.controller": Entry("fixed", f"{_ORLHF_CLI} --algo.kl.target (None: fixed)"),
        "kl.horizon": Entry(10000, f"{_ORLHF_CLI} --algo.kl.horizon"),
        "kl.target_kl": Entry(None, f"{_ORLHF_CLI} --algo.kl.target"),
        "kl.reward_form": Entry(
            "token",
            f"{_ORLHF_ADV} (the baseline on the raw score, then compute_reward from openrlhf/models/utils.py, "
            "then get_cumulative_returns)",
        ),
        "async.is_cap": Entry(5.0, f"{_ORLHF_CLI} --algo.advantage.is_correction_threshold"),
        "async.is_floor": Entry(0.5, f"{_ORLHF_CLI} --algo.advantage.is_correction_threshold"),
        "async.is_level": Entry("token", f"{_ORLHF_CLI} --algo.advantage.is_correction_type (tis)"),
        "async.is_mode": Entry("truncate", f"{_ORLHF_CLI} --algo.advantage.is_correction_type (tis)"),
    },
    "trl": {
        "trainer.clip_eps": Entry(0.2, f"{_TRL_GRPO} epsilon"),
        "trainer.clip_eps_high": Entry(0.2, f"{_TRL_GRPO} epsilon_high (default: epsilon)"),
        "trainer.dual_clip": Entry(None, f"{_TRL_GRPO} (none; its delta is trainer.delta_clip)"),
        "trainer.delta_clip": Entry(None, f"{_TRL_GRPO} delta"),
        "trainer.log_ratio_clamp": Entry(None, _TRL_LOSS),
        "trainer.loss_agg": Entry("token-mean", f"{_TRL_GRPO} loss_type (dapo)"),
        "trainer.std_ddof": Entry(1, "trl/trainer/utils.py nanstd (Bessel's correction)"),
        "trainer.std_eps": Entry(1e-4, "trl/trainer/grpo_trainer.py _generate_and_score_completions"),
        "trainer.group_of_one": Entry("zero", "trl/trainer/grpo_trainer.py _generate_and_score_completions"),
        "trainer.epochs": Entry(1, f"{_TRL_GRPO} num_iterations"),
        "trainer.gamma": Entry(1.0, "trl/experimental/ppo/ppo_config.py gamma"),
        "trainer.lam": Entry(0.95, "trl/experimental/ppo/ppo_config.py lam"),
        "trainer.value_clip": Entry(0.2, "trl/experimental/ppo/ppo_config.py cliprange_value"),
        "kl.estimator": Entry(
            _per_target("k1", "k3"),
            f"reward: trl/experimental/ppo/ppo_config.py kl_estimator; loss: {_TRL_LOSS}",
        ),
        "kl.log_ratio_clamp": Entry(None, _TRL_LOSS),
        "kl.clamp": Entry(None, _TRL_LOSS),
        "kl.controller": Entry("fixed", f"{_TRL_GRPO} beta (a constant)"),
        "kl.horizon": Entry(10000, "not used by TRL (rlsim default)"),
        "kl.target_kl": Entry(None, "not used by TRL"),
        "kl.reward_form": Entry(
            "sequence",
            "trl/trainer/rloo_trainer.py _generate_and_score_completions (beta x summed KL off the reward "
            f"before the baseline); GRPO has no KL in the reward ({_TRL_LOSS} adds beta x KL to the loss)",
        ),
        "async.is_cap": Entry(3.0, f"{_TRL_GRPO} vllm_importance_sampling_clip_max"),
        "async.is_floor": Entry(None, f"{_TRL_GRPO} vllm_importance_sampling_clip_min"),
        "async.is_level": Entry("sequence", f"{_TRL_GRPO} vllm_importance_sampling_mode (sequence_mask)"),
        "async.is_mode": Entry("mask", f"{_TRL_GRPO} vllm_importance_sampling_mode (sequence_mask)"),
    },
}
CONVENTION_KEYS: tuple[str, ...] = tuple(TABLE["rlsim"])


def _section(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A section of the raw config as a dict of the keys it sets (a model: its explicitly set fields)."""
    sec = data.get(name)
    if sec is None and name == "async":
        sec = data.get("async_")
    if isinstance(sec, BaseModel):
        return sec.model_dump(exclude_unset=True)
    return dict(sec) if isinstance(sec, Mapping) else {}


def preset_name(data: Mapping[str, Any]) -> str:
    return str(_section(data, "trainer").get("conventions", "rlsim"))


def apply_preset(data: Any) -> Any:
    """The raw config (a mapping) with each convention key it leaves unset taken from its preset; an
    unknown preset is left for validation to report (with the valid names)."""
    if not isinstance(data, Mapping):
        return data
    name = preset_name(data)
    if name not in TABLE or name == "rlsim":
        return data  # rlsim's values are the fields' own defaults
    out = dict(data)
    sections: dict[str, dict[str, Any]] = {}
    for path, entry in TABLE[name].items():
        section, key = path.split(".")
        current = sections.setdefault(section, _section(data, section))
        if key not in current:
            current[key] = entry.resolve(data)
    for section, values in sections.items():
        where = "async_" if section == "async" and "async_" in out and "async" not in out else section
        out[where] = values
    return out


def resolved_conventions(config: Any) -> dict[str, Any]:
    """For results.json: the preset, and per convention key its value in ``config`` (a ``RunConfig``)
    and its source: the preset's citation where the value is the preset's, ``override`` otherwise."""
    dumped = config.model_dump(mode="json", by_alias=True)
    name = config.trainer.conventions
    values: dict[str, Any] = {}
    for path, entry in TABLE[name].items():
        section, key = path.split(".")
        value = dumped[section][key]
        preset = entry.resolve(dumped)
        cited = f"{SOURCES[name]}: {entry.source}" if name in SOURCES else entry.source
        source = cited if value == preset else "override"
        values[path] = {"value": value, "source": source}
    return {"preset": name, "values": values}


class TrainerConventions(BaseModel):
    """The convention keys of the ``trainer`` section (``TrainerConfig`` inherits them); defaults are
    rlsim's behaviour. ``conventions``: the preset that fills the keys a config leaves unset.
    ``clip_eps_high``: the upper clip (None: ``clip_eps``); ``dual_clip``: ``c`` > 1 (None: off);
    ``delta_clip``: TRL's ``delta``, > 1 + the upper clip (None: off; rlsim.algorithms.losses);
    ``log_ratio_clamp``: on the policy ratio's log before ``exp`` (None: off); ``loss_agg`` and
    ``loss_scale`` (rlsim.algorithms.aggregation; None: the workload's longest response);
    ``std_ddof`` / ``std_eps`` / ``group_of_one``: GRPO's group std (rlsim.algorithms.advantages).
    ``mini_batch_size``: rollouts per optimizer step, each epoch making batch / size steps (None: one
    step on the whole batch; verl ``ppo_mini_batch_size``, OpenRLHF ``train_batch_size``)."""

    conventions: Preset = "rlsim"
    clip_eps_high: float | None = Field(None, gt=0)
    dual_clip: float | None = Field(None, gt=1)
    delta_clip: float | None = Field(None, gt=1)
    log_ratio_clamp: float | None = Field(None, gt=0)
    loss_agg: LossAggregation = "token-mean"
    loss_scale: float | None = Field(None, gt=0)
    std_ddof: Literal[0, 1] = 0
    std_eps: float = Field(1e-6, ge=0)
    group_of_one: Literal["zero", "reward"] = "zero"
    mini_batch_size: int | None = Field(None, ge=1)


def convention_problems(config: Any) -> list[str]:
    """Cross-field rules of the convention keys (a ``RunConfig``); empty when all hold."""
    t, problems = config.trainer, []
    if t.loss_scale is not None and t.loss_agg != "seq-mean-token-sum-norm":
        problems.append(
            f"trainer.loss_scale: applies to trainer.loss_agg seq-mean-token-sum-norm only (it is {t.loss_agg}); "
            "unset it or change the mode"
        )
    batch = config.workload.prompts_per_step * config.workload.group_size
    if t.mini_batch_size is not None and batch % t.mini_batch_size:
        problems.append(
            f"trainer.mini_batch_size: {t.mini_batch_size} rollouts do not divide the batch of {batch} "
            "(workload.prompts_per_step x group_size); pick a divisor so every optimizer step is the same size"
        )
    problems += _delta_problems(t)
    floor, cap = config.async_.is_floor, config.async_.is_cap
    if floor is not None and not 0 < floor <= 1:
        problems.append(f"async.is_floor: {floor} must lie in (0, 1]; a floor above 1 would up-weight on-policy tokens")
    elif floor is not None and not floor < cap:
        problems.append(
            f"async.is_floor: {floor} must lie below async.is_cap ({cap}), as TRL requires of "
            "vllm_importance_sampling_clip_min; equal bounds weight every token 1 (truncate) or drop it (mask)"
        )
    return problems


def _delta_problems(t: Any) -> list[str]:
    """TRL's ``delta`` only bounds negative advantages' loss when above the upper clip; below, it would
    also move the positive side's clip (TRL recommends ``delta > 1 + epsilon``)."""
    high = t.clip_eps if t.clip_eps_high is None else t.clip_eps_high
    if t.delta_clip is None or t.delta_clip > 1 + high:
        return []
    return [
        f"trainer.delta_clip: {t.delta_clip} must be above 1 + the upper clip ({1 + high:g}); below it "
        "would cap positive advantages' ratio too (set trainer.clip_eps_high for that), so raise it or unset it"
    ]
