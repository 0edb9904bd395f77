"""Each step's figures under the metric names verl logs, so its dashboards and scripts read rlsim's runs.

Names as in verl's ``verl/trainer/ppo/metric_utils.py`` (``compute_timing_metrics``,
``compute_throughout_metrics``, ``compute_data_metrics``), its trainer's ``marked_timer`` sections
(``gen``, ``reward``, ``update_actor``, ``update_weights``, ``step``) and its actor's update
metrics (``actor/pg_loss``, ``actor/pg_clipfrac``, ``actor/ppo_kl``, ``actor/grad_norm``,
``perf/mfu/actor``). Only names whose meaning rlsim measures are written; a step record without the
figure leaves the name out rather than writing a zero.

Each name carries verl's number, not a neighbour of it (rlsim's own figures stay in the step record's
``train`` under rlsim's names: ``loss``, ``clip_fraction``, ``reward_mean``):

- ``actor/pg_loss``: the surrogate alone (``train.policy_loss``); with ``kl.target: loss`` the KL term
  goes under ``actor/kl_loss`` (the aggregated KL before ``kl.coef``) and ``actor/kl_coef``, as
  ``verl/workers/actor/dp_actor.py`` ``update_policy`` logs them. ``train.loss`` holds their sum.
  With ``kl.target: reward`` the coefficient is ``actor/reward_kl_penalty_coeff``
  (``verl/trainer/ppo/ray_trainer.py`` ``apply_kl_penalty``).
- ``actor/pg_clipfrac``: tokens where the clipped term is the one taken (``torch.gt(pg_losses2,
  pg_losses1)`` in ``verl/trainer/ppo/core_algos.py`` ``compute_policy_loss_vanilla``), from
  ``train.pg_clip_fraction``; rlsim's ``clip_fraction`` counts every token whose ratio left the trust
  region, in either direction (ratio 1.5 with advantage -1: 1 for rlsim, 0 for verl).
  ``actor/pg_clipfrac_lower``: tokens held by the dual clip.
- ``critic/rewards/mean``: the mean over sequences of the summed token-level rewards, the KL penalty
  included when ``kl.target: reward`` (``verl/trainer/ppo/metric_utils.py`` ``compute_data_metrics``
  sums ``token_level_rewards``); ``critic/score/mean`` the raw scores' mean (``token_level_scores``).

A record written before these fields existed gets ``actor/pg_loss`` from ``train.loss`` and
``critic/rewards/mean`` from ``train.reward_mean`` only when it has no KL (then they coincide);
otherwise the name is left out.

Differences a reader should know: phase times are the union of the phase's events (the
``overlapped`` schedule runs phases at once; verl's timers are sequential sections).
``perf/throughput`` divides by the number of GPUs as verl does, with 1 on a CPU-only run. verl's
clip fraction is a mean of micro-batch means; here it is over all the batch's tokens at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsim.hardware.flops import shape_of_model
from rlsim.hardware.gemm import measure_gemm_gflops
from rlsim.run_results import StepRecord

# verl's section names for rlsim's phases.
TIMING = {"generate": "gen", "score": "reward", "update": "update_actor", "sync": "update_weights", "total": "step"}
# A step with a reference or critic (PPO) has verl's own sections; its actor update is ``update_actor`` there.
EXPERIENCE_TIMING = {
    "reference": "ref",
    "values": "values",
    "advantages": "adv",
    "update_actor": "update_actor",
    "update_critic": "update_critic",
}
ACTOR = {
    "policy_loss": "actor/pg_loss",
    "pg_clip_fraction": "actor/pg_clipfrac",
    "pg_clip_fraction_lower": "actor/pg_clipfrac_lower",
    "kl_loss": "actor/kl_loss",
    "approx_kl": "actor/ppo_kl",
    "grad_norm": "actor/grad_norm",
}


@dataclass(frozen=True)
class UpdateFlops:
    """What MFU needs: the policy's forward FLOPs per token, the passes per update, the measured peak.

    ``forward_per_token``: 2 x (weight-matmul parameters + LM head) FLOPs; attention scores are left
    out (under 2% for the built-in policy at its sequence lengths). An update runs one forward pass
    for the old log-probs, then ``epochs`` x (forward + backward = 3 forward) passes.
    ``peak_flops``: the fp32 GEMM rate measured on the trainer's threads at the start of the run, FLOP/s.
    """

    forward_per_token: float
    epochs: int
    peak_flops: float

    @property
    def per_token(self) -> float:
        return self.forward_per_token * (1 + 3 * self.epochs)


def policy_update_flops(policy_dir: str | Path, epochs: int, peak_gflops: float) -> UpdateFlops | None:
    """``UpdateFlops`` for a Hugging Face causal LM folder; None when its shape is not known."""
    try:
        shape = shape_of_model(policy_dir)
        config = json.loads((Path(policy_dir) / "config.json").read_text())
    except Exception:  # noqa: BLE001 - no MFU is better than no run: the metric is left out
        return None
    head = int(config.get("vocab_size", 0)) * shape.hidden
    return UpdateFlops(2.0 * (shape.matmul_params + head), epochs, peak_gflops * 1e9)


def verl_metrics(record: Mapping[str, Any], flops: UpdateFlops | None = None, n_gpus: int = 0) -> dict[str, float]:
    """The flat ``{name: value}`` map of one ``results.json`` step record (seconds, tokens, tokens/s)."""
    out: dict[str, float] = {}
    times = record.get("time_s", {})
    for phase, name in TIMING.items():
        if phase in times:
            out[f"timing_s/{name}"] = float(times[phase])
    for phase, name in EXPERIENCE_TIMING.items():
        if times.get(phase) is not None:
            out[f"timing_s/{name}"] = float(times[phase])
    tokens = record.get("tokens", {})
    prompt, response = int(tokens.get("prompt", 0)), int(tokens.get("generated", 0))
    n = int(record.get("rollouts", {}).get("generated", 0))
    total_tokens = prompt + response
    step_s = float(times.get("total", 0.0))
    if n > 0:
        out["response_length/mean"] = response / n
        out["prompt_length/mean"] = prompt / n
    out["perf/total_num_tokens"] = float(total_tokens)
    if step_s > 0:
        out["perf/time_per_step"] = step_s
        out["perf/throughput"] = total_tokens / (step_s * max(n_gpus, 1))
    if response > 0 and times.get("generate"):
        out["timing_per_token_ms/gen"] = 1000.0 * times["generate"] / response
    if total_tokens > 0 and times.get("update"):
        out["timing_per_token_ms/update_actor"] = 1000.0 * times["update"] / total_tokens
    out.update(_train_metrics(record.get("train") or {}, flops, total_tokens))
    return {k: v for k, v in out.items() if math.isfinite(v)}


def verl_async_metrics(record: StepRecord, earlier: Sequence[StepRecord], group_size: int) -> dict[str, float]:
    """The fully async keys of one ``schedule: async`` step (``earlier``: the run's steps before it).

    Names as verl's fully async recipe logs them (volcengine/verl ``recipe/fully_async_policy/``, read
    at commits 0062357 and, for ``detach_utils.py``, 0026c74): ``detach_utils.py``
    ``MetricsAggregator._special_metrics_aggergate`` for ``trainer/idle_ratio``;
    ``fully_async_rollouter.py`` ``update_param_version`` for ``rollouter/*`` and ``get_statistics``
    for the ``count/`` keys (``detach_utils.assemble_batch_from_rollout_samples`` prefixes them with
    ``fully_async/``); ``fully_async_trainer.py`` ``_collect_metrics_from_samples`` for the stale counts
    and ``current_param_version``, ``_get_samples_from_queue`` for ``total_wait_time`` and
    ``_trigger_parameter_sync_after_step`` for ``timing_s/param_sync``. verl's "sample" is one prompt
    with its ``rollout.n`` trajectories: one group here, so samples = rollouts / ``group_size``.

    A step here is the life of one policy version in the engine (from one weight load to the next), which
    is verl's rollouter "version time"; idle is the step time an actor ran nothing. verl derives
    ``trainer/idle_ratio`` from its ``timing_s/gen``, which in its fully async trainer is the wait for
    samples; here ``timing_s/gen`` keeps its sync meaning (generation time), as in ``verl_metrics``.
    With ``async.partial_rollouts`` the ``fully_async/partial/*`` keys (``detach_utils.py``, the batch's
    ``param_version_start`` / ``_end`` per trajectory) count this batch's rollouts: ``total_partial_num``
    those sampled by more than one version, ``partial_ratio`` their share, ``max_partial_span`` the most
    versions between a rollout's first and last token (the step record's ``version_span``).
    """
    total = record.time_s.total
    out: dict[str, float] = {}
    if total > 0:
        trainer = _busy(record, "trainer")
        rollout = _busy(record, "rollout")
        out["trainer/idle_ratio"] = 1.0 - trainer / total
        out["fully_async/total_wait_time"] = total - trainer
        out["rollouter/idle_ratio"] = 1.0 - rollout / total
        out["rollouter/active_time"] = rollout
        out["rollouter/version_time"] = total
    steps = [*earlier, record]
    stale = sum(_stale_rollouts(s) for s in steps)
    out["fully_async/count/stale_trajectory_processed"] = float(stale)
    out["fully_async/count/stale_samples_processed"] = float(stale // group_size)
    out["fully_async/count/total_generated_samples"] = float(sum(s.rollouts.generated for s in steps) // group_size)
    out["fully_async/count/dropped_stale_samples"] = float(sum(s.dropped_stale or 0 for s in steps) // group_size)
    if record.policy_version is not None:  # the version the trainer held when it took the batch
        out["fully_async/count/current_param_version"] = float(record.policy_version - 1)
    latency = record.sync.latency_s if record.sync is not None else None
    if latency is not None:
        out["timing_s/param_sync"] = float(latency)
    spans = {int(k): n for k, n in (record.version_span or {}).items()}
    if spans:
        partial = sum(n for k, n in spans.items() if k > 0)
        out["fully_async/partial/total_partial_num"] = float(partial)
        out["fully_async/partial/partial_ratio"] = partial / max(sum(spans.values()), 1)
        out["fully_async/partial/max_partial_span"] = float(max(spans))
    return out


def _busy(record: StepRecord, role: str) -> float:
    """Seconds the role's workers (``trainer``, ``rollout``; one each under async) worked in the step."""
    return sum(v for k, v in record.busy_s.items() if k.startswith(role))


def _stale_rollouts(record: StepRecord) -> int:
    """Rollouts of the step's batch made by a policy at least one version older than the trainer's."""
    return sum(n for lag, n in (record.staleness or {}).items() if int(lag) >= 1)


def _train_metrics(train: Mapping[str, Any], flops: UpdateFlops | None, tokens: int) -> dict[str, float]:
    out = {name: float(train[key]) for key, name in ACTOR.items() if train.get(key) is not None}
    no_kl = train.get("kl") is None  # then the loss is the surrogate and the rewards are the scores
    if "actor/pg_loss" not in out and no_kl and train.get("loss") is not None:
        out["actor/pg_loss"] = float(train["loss"])  # a record from before policy_loss was written
    if train.get("kl_coef") is not None:  # verl's name depends on where the KL went
        where = "actor/reward_kl_penalty_coeff" if train.get("kl_target") == "reward" else "actor/kl_coef"
        out[where] = float(train["kl_coef"])
    for key, name in (("value_loss", "critic/vf_loss"), ("entropy", "actor/entropy")):
        if train.get(key) is not None:
            out[name] = float(train[key])
    if train.get("reward_mean") is not None:
        out["critic/score/mean"] = float(train["reward_mean"])
    if train.get("sequence_reward_mean") is not None:
        out["critic/rewards/mean"] = float(train["sequence_reward_mean"])
    elif no_kl and train.get("reward_mean") is not None:
        out["critic/rewards/mean"] = float(train["reward_mean"])
    seconds = float(train.get("seconds") or 0.0)
    if flops is not None and seconds > 0 and flops.peak_flops > 0:
        # MFU of the update alone (the trainer's own timer), as verl's perf/mfu/actor is.
        out["perf/mfu/actor"] = flops.per_token * tokens / seconds / flops.peak_flops
    return out


def measure_update_flops(policy_dir: str | Path, epochs: int, threads: int, device: str = "cpu") -> UpdateFlops | None:
    """``policy_update_flops`` with the peak measured now: fp32 GEMMs on ``threads`` threads (about a second)."""
    peak = float(measure_gemm_gflops(threads, repeats=3, device=device)["gflops"])
    return policy_update_flops(policy_dir, epochs, peak)
