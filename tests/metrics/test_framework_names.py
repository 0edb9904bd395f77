"""verl-named metrics from a step record, MFU from the FLOP count, and run_loop writing them (results.json
and TensorBoard scalars) with a fake session standing in for the actors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.loop.config import RunConfig
from rlsim.loop.run import run_loop
from rlsim.metrics.framework_names import UpdateFlops, policy_update_flops, verl_async_metrics, verl_metrics
from rlsim.run_results import StepRecord

RECORD = {
    "step": 2,
    "time_s": {"generate": 4.0, "score": 1.5, "update": 2.0, "sync": 0.5, "idle": 0.1, "total": 8.0},
    "rollouts": {"generated": 8, "scored": 8, "trained": 8},
    "tokens": {"prompt": 80, "generated": 320},
    "train": {
        "loss": -0.25,
        "clip_fraction": 0.125,
        "approx_kl": 0.01,
        "grad_norm": 0.75,
        "reward_mean": 0.3,
        "reward_std": 0.1,
        "seconds": 2.0,
        "sequences": 8,
        "response_tokens": 320,
    },
    "overhead_fraction": 0.0125,
    "cpu_s": {"rollout": 3.0},
    "schedule": "sequential",
    "sync": {"method": "simulated", "seconds": 0.5, "detail": ""},
}


def test_step_record_maps_to_verls_names() -> None:
    m = verl_metrics(RECORD)
    assert m["timing_s/gen"] == 4.0 and m["timing_s/reward"] == 1.5 and m["timing_s/update_actor"] == 2.0
    assert m["timing_s/update_weights"] == 0.5 and m["timing_s/step"] == 8.0
    assert m["perf/total_num_tokens"] == 400  # prompt + response tokens, as verl's global_token_num
    assert m["perf/throughput"] == 400 / 8.0  # tokens / (step seconds x 1 device)
    assert m["response_length/mean"] == 40 and m["prompt_length/mean"] == 10
    assert m["timing_per_token_ms/gen"] == pytest.approx(1000 * 4.0 / 320)
    assert m["critic/rewards/mean"] == 0.3 and m["actor/pg_loss"] == -0.25 and m["actor/grad_norm"] == 0.75
    assert "perf/mfu/actor" not in m  # no FLOP model given: left out, never a made-up zero
    assert all(isinstance(v, float) or isinstance(v, int) for v in m.values())


def test_a_ppo_step_maps_its_experience_phases_and_critic_loss_to_verls_names() -> None:
    times = {
        **RECORD["time_s"],
        "update": 2.5,
        "reference": 0.75,
        "values": 1.25,
        "advantages": 0.25,
        "update_actor": 2.0,
        "update_critic": 1.5,
    }
    m = verl_metrics({**RECORD, "time_s": times, "train": {**RECORD["train"], "value_loss": 0.5, "entropy": 9.5}})
    assert (m["timing_s/ref"], m["timing_s/values"], m["timing_s/adv"]) == (0.75, 1.25, 0.25)
    assert m["timing_s/update_actor"] == 2.0 and m["timing_s/update_critic"] == 1.5  # not the union (2.5)
    assert m["critic/vf_loss"] == 0.5 and m["actor/entropy"] == 9.5
    assert "timing_s/ref" not in verl_metrics(RECORD) and "critic/vf_loss" not in verl_metrics(RECORD)


def test_mfu_is_update_flops_over_measured_peak() -> None:
    # 1 GFLOP forward per token, 1 epoch: old log-probs (1 forward) + forward and backward (3) = 4 GFLOP/token.
    flops = UpdateFlops(forward_per_token=1e9, epochs=1, peak_flops=1e12)
    m = verl_metrics(RECORD, flops)
    assert m["perf/mfu/actor"] == pytest.approx(4e9 * 400 / 2.0 / 1e12)  # = 0.8


def test_policy_flops_count_layers_and_lm_head(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    f = policy_update_flops(tmp_path, epochs=2, peak_gflops=50.0)
    # per layer: 2 h (heads x hd) + 2 h (kv x hd) + 3 h I = 2*64*64 + 2*64*32 + 3*64*128 = 36864; 2 layers
    # = 73728, + LM head 1000 x 64 = 64000; forward = 2 x 137728 FLOPs per token.
    assert f is not None and f.forward_per_token == 2 * (73728 + 64000)
    assert f.per_token == f.forward_per_token * 7 and f.peak_flops == 50e9
    assert policy_update_flops(tmp_path / "missing", 1, 50.0) is None


class OneStepSession:
    def __init__(self, config: RunConfig) -> None:
        self.config, self.startup_s, self.backend = config, {}, None

    def describe(self) -> dict:
        return {"actors": []}

    def step(self, step: int, schedule=None, progress=None):
        rows = [
            {"step": step, "actor": "rollout", "phase": "generate", "batch": 0, "start": 0.0, "end": 4.0},
            {"step": step, "actor": "trainer", "phase": "update", "batch": 0, "start": 5.5, "end": 7.5},
        ]
        return StepRecord.model_validate(dict(RECORD, step=step)), rows


def test_run_writes_metrics_per_step_and_tensorboard_scalars(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = RunConfig(steps=2)
    run_loop(config, tmp_path / "out", show_progress=False, session=OneStepSession(config), tensorboard=tmp_path / "tb")
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["gemm_peak_gflops"] > 0
    for step in saved["steps"]:
        assert step["metrics"]["timing_s/step"] == 8.0
        assert 0 < step["metrics"]["perf/mfu/actor"] < 1  # the built-in policy against this machine's GEMM peak
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert "timing_s/gen" in events.Tags()["scalars"] and "perf/mfu/actor" in events.Tags()["scalars"]
    assert [(e.step, e.value) for e in events.Scalars("timing_s/gen")] == [(1, 4.0), (2, 4.0)]


def async_record(step: int, staleness: dict[str, int], generated: int, dropped: int) -> StepRecord:
    return StepRecord.model_validate(
        dict(
            RECORD,
            step=step,
            schedule="async",
            rollouts={"generated": generated, "scored": generated, "trained": 8},
            busy_s={"rollout": 6.0, "scorer-0": 1.5, "trainer": 2.5},
            policy_version=step,
            staleness=staleness,
            dropped_stale=dropped,
            sync={"method": "vllm-reload", "seconds": 0.5, "detail": "", "latency_s": 1.25},
        )
    )


def test_an_async_step_maps_to_verls_fully_async_names() -> None:
    # Groups of 4: step 1 trained 8 fresh rollouts; step 2 trained 4 fresh and 4 one version old, after
    # 16 + 12 rollouts generated and 4 dropped as stale over the two steps.
    first = async_record(1, {"0": 8}, 16, 0)
    second = async_record(2, {"0": 4, "1": 4}, 12, 4)
    m = verl_async_metrics(second, [first], group_size=4)
    assert m["trainer/idle_ratio"] == pytest.approx(1 - 2.5 / 8.0)  # busy 2.5 s of the 8 s step
    assert m["fully_async/total_wait_time"] == 5.5
    assert m["rollouter/idle_ratio"] == pytest.approx(0.25) and m["rollouter/active_time"] == 6.0
    assert m["rollouter/version_time"] == 8.0
    assert m["fully_async/count/stale_trajectory_processed"] == 4  # the 4 rollouts one version old
    assert m["fully_async/count/stale_samples_processed"] == 1  # = one group
    assert m["fully_async/count/total_generated_samples"] == 7  # (16 + 12) / 4, cumulative
    assert m["fully_async/count/dropped_stale_samples"] == 1
    assert m["fully_async/count/current_param_version"] == 1  # the trainer held version 1 when it took batch 2
    assert m["timing_s/param_sync"] == 1.25
    assert verl_async_metrics(first, [], 4)["fully_async/count/stale_samples_processed"] == 0
    assert not any(k.startswith("fully_async/partial/") for k in m)  # no partial rollouts: no such keys


def test_partial_rollouts_map_to_verls_partial_keys() -> None:
    # 8 rollouts: 5 sampled by one version, 2 across one weight load, 1 across two.
    record = async_record(3, {"1": 8}, 8, 0).model_copy(update={"version_span": {"0": 5, "1": 2, "2": 1}})
    m = verl_async_metrics(record, [], group_size=4)
    assert m["fully_async/partial/total_partial_num"] == 3
    assert m["fully_async/partial/partial_ratio"] == pytest.approx(3 / 8)
    assert m["fully_async/partial/max_partial_span"] == 2


def test_the_actor_and_reward_names_carry_verls_numbers_not_rlsims() -> None:
    # A GRPO step with the KL in the loss: train.loss (0.0368) includes coef x KL, the surrogate is 0; the
    # ratio-outside count (rlsim) is 1.0 where the taken-clip count (verl) is 0.
    train = {
        **RECORD["train"],
        "loss": 0.0368,
        "policy_loss": 0.0,
        "kl_loss": 0.368,
        "kl_coef": 0.1,
        "kl_target": "loss",
        "kl": 0.5,
        "clip_fraction": 1.0,
        "pg_clip_fraction": 0.0,
        "reward_mean": 1.0,
        "sequence_reward_mean": 0.95,
    }
    m = verl_metrics({**RECORD, "train": train})
    assert m["actor/pg_loss"] == 0.0 and m["actor/kl_loss"] == 0.368 and m["actor/kl_coef"] == 0.1
    assert m["actor/pg_clipfrac"] == 0.0
    assert m["critic/rewards/mean"] == 0.95 and m["critic/score/mean"] == 1.0
    assert "actor/pg_clipfrac_lower" not in m  # no dual clip: left out
    in_reward = verl_metrics({**RECORD, "train": {**train, "kl_target": "reward"}})
    assert in_reward["actor/reward_kl_penalty_coeff"] == 0.1 and "actor/kl_coef" not in in_reward
    # A record from before these fields, with a KL: the names whose meaning it cannot give are left out.
    old = {k: v for k, v in train.items() if k not in ("policy_loss", "pg_clip_fraction", "sequence_reward_mean")}
    m = verl_metrics({**RECORD, "train": old})
    assert "actor/pg_loss" not in m and "critic/rewards/mean" not in m and "actor/pg_clipfrac" not in m
    assert m["critic/score/mean"] == 1.0
