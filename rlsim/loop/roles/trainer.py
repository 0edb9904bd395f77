"""The policy update (GRPO, RLOO or PPO) on a torch copy of the policy: the clipped surrogate on the
rollouts' own tokens.

Per step: the behaviour log-probs recomputed by this copy before the update (what OpenRLHF/verl do,
since the engine's numerics differ slightly); the experience (``rlsim.algorithms.experience``:
advantages per token from the rewards, plus the reference's log-probs and the critic's values,
computed elsewhere and passed in); then per epoch, forward + backward over micro-batches (gradient
accumulation) and one optimizer step. Losses are token-level means over all response tokens.

The reference and the critic are separate objects (``ReferenceModel``, ``CriticModel``) whose outputs
come in as per-uid arrays, so they can run in their own processes; ``train_step`` takes an in-process
critic only as a convenience that updates it with the same experience.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rlsim.algorithms.actor_loss import SurrogateSettings, actor_loss
from rlsim.algorithms.aggregation import LossAggregation
from rlsim.algorithms.experience import AlgorithmSettings, Experience, make_experience
from rlsim.algorithms.kl_control import KlController, sequence_mean_kl
from rlsim.algorithms.off_policy import IsCorrection, IsLevel, IsMode, correct_off_policy
from rlsim.io import atomic_writer
from rlsim.loop.roles.packing import Packed, micro_batches, mini_batch_split, pad_id, response_logprobs
from rlsim.rollout.types import Rollout
from rlsim.torch_setup import prepare_torch

if TYPE_CHECKING:
    from rlsim.algorithms.actor_loss import SurrogateSettings

PerToken = Mapping[int, np.ndarray]


@dataclass(frozen=True)
class TrainerSettings:
    """``lr`` for AdamW; ``clip_eps`` the PPO ratio clip; ``micro_batch`` sequences per forward/backward."""

    lr: float = 1e-6
    clip_eps: float = 0.2
    epochs: int = 1
    micro_batch: int = 16
    max_grad_norm: float = 1.0
    device: str = "cpu"
    threads: int | None = None
    seed: int = 0
    algorithm: AlgorithmSettings = field(default_factory=AlgorithmSettings)
    is_cap: float | None = None  # async: the importance weight's cap (algorithms.off_policy; None: no correction)
    is_floor: float | None = None  # and its lower bound (None: none)
    is_level: IsLevel = "token"  # a ratio per token, or one per rollout
    is_mode: IsMode = "truncate"  # clip into the bounds, or weight 0 outside them
    # The surrogate's and the aggregation's conventions (rlsim.algorithms.losses, .aggregation).
    clip_eps_high: float | None = None  # None: clip_eps (symmetric)
    dual_clip: float | None = None
    delta_clip: float | None = None
    log_ratio_clamp: float | None = None
    loss_agg: LossAggregation = "token-mean"
    loss_scale: float | None = None  # the seq-mean-token-sum-norm constant (tokens)
    mini_batch_size: int | None = None  # rollouts per optimizer step (None: the whole batch)


@dataclass
class TrainStats:
    """What one update did; times in seconds. ``loss`` is the last epoch's total actor loss (for GRPO
    without KL, the surrogate loss, as before); ``policy_loss`` its surrogate part; ``kl_loss`` the
    aggregated KL of the policy being trained to the reference, before ``kl.coef`` (``kl.target: loss``
    only); ``value_loss`` only when a critic was updated (ppo); ``kl`` the mean per-token KL of the
    behaviour policy to the reference (None when ``kl.coef`` is 0); ``entropy`` the mean next-token
    entropy (nats). ``clip_fraction``: tokens whose ratio left the trust region (rlsim's count);
    ``pg_clip_fraction``: tokens where the clipped term is the one taken (verl's ``actor/pg_clipfrac``);
    ``pg_clip_fraction_lower``: tokens held by the dual clip (None without it). ``reward_mean``: the
    raw scores' mean; ``sequence_reward_mean``: the mean over sequences of the summed token-level
    rewards, KL penalty included (verl's ``critic/rewards/mean``)."""

    sequences: int
    response_tokens: int
    loss: float
    clip_fraction: float
    approx_kl: float
    grad_norm: float
    reward_mean: float
    reward_std: float
    seconds: float
    algorithm: str = "grpo"
    policy_loss: float | None = None
    value_loss: float | None = None
    kl: float | None = None
    entropy: float | None = None
    is_weight_mean: float | None = None  # async only (rlsim.algorithms.off_policy.OffPolicyStats)
    is_truncated_fraction: float | None = None
    is_ratio_mean: float | None = None
    is_masked_fraction: float | None = None
    is_seq_truncated_fraction: float | None = None
    is_seq_masked_fraction: float | None = None
    pg_clip_fraction: float | None = None
    pg_clip_fraction_lower: float | None = None
    kl_loss: float | None = None
    kl_coef: float | None = None  # the KL coefficient this step used (it moves with kl.controller adaptive)
    kl_target: str | None = None  # where the KL went: reward or loss
    sequence_reward_mean: float | None = None
    optimizer_steps: int = 1  # epochs x mini-batches
    step_seconds: list[float] | None = None  # each optimizer step's forward + backward + step, seconds
    optimizer_seconds: list[float] | None = None  # and of it the gradient clip and AdamW step alone

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class PolicyTrainer:
    """Holds the policy in torch (fp32) with an AdamW optimizer; ``train_step`` updates it in place."""

    def __init__(self, policy_dir: Path, settings: TrainerSettings) -> None:
        from transformers import AutoModelForCausalLM

        self.settings = settings
        self._device = prepare_torch(settings.device, "trainer.device", settings.threads, settings.seed)
        self._model = AutoModelForCausalLM.from_pretrained(str(policy_dir), dtype=torch.float32).to(self._device)
        self._model.train()
        # No weight decay: a step with zero advantages must leave the policy unchanged.
        self._opt = torch.optim.AdamW(self._model.parameters(), lr=settings.lr, weight_decay=0.0)
        self._pad = pad_id(self._model.config)
        alg = settings.algorithm
        self._kl_control = KlController(alg.kl_coef, alg.kl_target_value, alg.kl_horizon)

    @property
    def algorithm(self) -> AlgorithmSettings:
        """The algorithm's settings with this step's KL coefficient (it moves under an adaptive controller)."""
        return replace(self.settings.algorithm, kl_coef=self._kl_control.value)

    @property
    def surrogate(self) -> SurrogateSettings:
        s = self.settings
        return SurrogateSettings(
            s.clip_eps, s.clip_eps_high, s.dual_clip, s.log_ratio_clamp, s.loss_agg, s.loss_scale, s.delta_clip
        )

    @property
    def _bounds_negatives(self) -> bool:
        """The dual clip or ``delta_clip`` bounds the loss of negative advantages (verl's ``pg_clipfrac_lower``)."""
        return self.settings.dual_clip is not None or self.settings.delta_clip is not None

    def _batches(self, rollouts: Sequence[Rollout]) -> list[Packed]:
        return micro_batches(rollouts, self.settings.micro_batch, self._pad, self._device)

    def policy_logprobs(self, rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
        """Per uid, float32 ``(len(response),)``: each response token's log-prob under the current policy."""
        out: dict[int, np.ndarray] = {}
        with torch.no_grad():
            for b in self._batches(rollouts):
                out.update(b.split(response_logprobs(self._model, b)[0]))
        return out

    def train_step(
        self,
        rollouts: Sequence[Rollout],
        rewards: Mapping[int, float],
        ref_logprobs: PerToken | None = None,
        values: PerToken | None = None,
        critic: Any = None,
    ) -> TrainStats:
        """One update on ``rollouts``; ``rewards`` maps each uid to its reward. ``ref_logprobs`` (needed
        when ``kl.coef`` > 0) and ``values`` (needed for ppo) come per uid from the reference and the
        critic; ``critic`` (a ``CriticModel``), when given, is updated with this step's returns."""
        t0 = time.perf_counter()
        exp = self.experience(rollouts, rewards, ref_logprobs, values)
        off = None
        s = self.settings
        if s.is_cap is not None:
            exp, off = correct_off_policy(exp, rollouts, IsCorrection(s.is_cap, s.is_floor, s.is_level, s.is_mode))
        stats = self.update(rollouts, exp)
        if off is not None:
            stats = replace(stats, **asdict(off))
        stats.reward_mean, stats.reward_std = _mean_std([float(rewards[x.uid]) for x in rollouts])
        if critic is not None and exp.returns is not None and exp.values is not None:
            stats.value_loss = critic.update(rollouts, exp.returns, exp.values).value_loss
        stats.seconds = time.perf_counter() - t0
        return stats

    def experience(
        self,
        rollouts: Sequence[Rollout],
        rewards: Mapping[int, float],
        ref_logprobs: PerToken | None = None,
        values: PerToken | None = None,
    ) -> Experience:
        """The behaviour log-probs under this copy, then the advantages (and ppo's returns); raises
        ``RuntimeError`` naming what is missing (a reward, the reference's log-probs, the critic's values)."""
        missing = [r.uid for r in rollouts if r.uid not in rewards]
        if missing:
            raise RuntimeError(f"{len(missing)} rollouts have no reward (first uids {missing[:5]}); none may be lost")
        try:
            return make_experience(
                self.algorithm, rollouts, rewards, self.policy_logprobs(rollouts), ref_logprobs, values
            )
        except ValueError as err:
            raise RuntimeError(f"the {self.settings.algorithm.algorithm} experience is incomplete: {err}") from err

    def update(self, rollouts: Sequence[Rollout], exp: Experience) -> TrainStats:
        """The actor update alone, from a complete ``Experience`` (rewards are not seen here): per epoch,
        one optimizer step per mini-batch of ``mini_batch_size`` rollouts (the whole batch by default),
        each step's loss aggregated over its own mini-batch, as verl's ``ppo_mini_batch_size`` and
        OpenRLHF's ``train_batch_size`` split a rollout batch."""
        t0 = time.perf_counter()
        parts = [self._batches(part) for part in mini_batch_split(rollouts, self.settings.mini_batch_size)]
        for b in (b for part in parts for b in part):
            b.extra["old"], b.extra["adv"] = b.flat(exp.old_logprobs), b.flat(exp.advantages)
            if exp.ref_logprobs is not None:
                b.extra["ref"] = b.flat(exp.ref_logprobs)
        step_s: list[float] = []
        opt_s: list[float] = []
        for _ in range(self.settings.epochs):
            sums: dict[str, float] = {}
            norms = []
            for part in parts:
                t_step = time.perf_counter()
                for k, v in self._epoch(part, sum(b.tokens for b in part)).items():
                    sums[k] = sums.get(k, 0.0) + v
                t_opt = time.perf_counter()
                norm = torch.nn.utils.clip_grad_norm_(self._model.parameters(), self.settings.max_grad_norm)
                norms.append(float(norm))
                self._opt.step()
                self._opt.zero_grad(set_to_none=True)
                opt_s.append(time.perf_counter() - t_opt)
                step_s.append(time.perf_counter() - t_step)
        stats = self._stats(rollouts, exp, sums, len(parts), float(np.mean(norms)))
        if exp.kl is not None:  # the coefficient for the next step (verl: after apply_kl_penalty)
            self._kl_control.update(sequence_mean_kl(exp.kl.values()), len(rollouts))
        stats.optimizer_steps, stats.step_seconds = len(step_s), [round(x, 6) for x in step_s]
        stats.optimizer_seconds = [round(x, 6) for x in opt_s]
        stats.seconds = time.perf_counter() - t0
        return stats

    def _stats(
        self, rollouts: Sequence[Rollout], exp: Experience, sums: dict[str, float], parts: int, grad_norm: float
    ) -> TrainStats:
        """The last epoch's figures: losses as the mean over its mini-batches, counts over all tokens."""
        alg = self.algorithm
        total = sum(len(r.response_ids) for r in rollouts)
        kl_in_loss = alg.uses_reference and alg.kl_target == "loss"
        seq_rewards = list(exp.sequence_rewards.values()) if exp.sequence_rewards else None
        return TrainStats(
            sequences=len(rollouts),
            response_tokens=total,
            loss=sums["loss"] / parts,
            clip_fraction=sums["outside"] / max(total, 1),
            pg_clip_fraction=sums["clipped"] / max(total, 1),
            pg_clip_fraction_lower=sums["dual_clipped"] / max(total, 1) if self._bounds_negatives else None,
            kl_loss=sums["kl_loss"] / parts if kl_in_loss else None,
            kl_coef=alg.kl_coef if alg.uses_reference else None,
            kl_target=alg.kl_target if alg.uses_reference else None,
            sequence_reward_mean=float(np.mean(seq_rewards)) if seq_rewards else None,
            approx_kl=sums["approx_kl"] / max(total, 1),
            grad_norm=grad_norm,
            reward_mean=0.0,
            reward_std=0.0,
            seconds=0.0,
            algorithm=alg.algorithm,
            policy_loss=sums["policy_loss"] / parts,
            kl=exp.kl_mean(),
            entropy=sums["entropy"] / max(total, 1),
        )

    def _epoch(self, batches: list[Packed], total: int) -> dict[str, float]:
        """Forward + backward over every micro-batch; sums of the losses and per-token statistics."""

        batch = (sum(len(b.uids) for b in batches), total)
        keys = ("loss", "policy_loss", "kl_loss", "outside", "clipped", "dual_clipped", "approx_kl", "entropy")
        sums = dict.fromkeys(keys, 0.0)
        for b in batches:
            new, entropy = response_logprobs(self._model, b, with_entropy=True)
            assert entropy is not None  # asked for with_entropy
            # Aggregated over the whole batch's tokens (or sequences), so the accumulated gradient is
            # that of one full-batch loss, whatever the micro-batch size.
            out = actor_loss(
                new,
                b.extra["old"],
                b.extra["adv"],
                b.lengths,
                batch,
                self.surrogate,
                self.algorithm,
                b.extra.get("ref"),
            )
            out.loss.backward()
            with torch.no_grad():
                sums["loss"] += float(out.loss)
                sums["policy_loss"] += float(out.policy_loss)
                sums["kl_loss"] += float(out.kl_loss) if out.kl_loss is not None else 0.0
                sums["outside"] += float(out.terms.outside.sum())
                sums["clipped"] += float(out.terms.clipped.sum())
                sums["dual_clipped"] += float(out.terms.dual_clipped.sum())
                sums["approx_kl"] += float((b.extra["old"] - new).sum())
                sums["entropy"] += float(entropy.sum())
        return sums

    def warmup(self, rollouts: Sequence[Rollout]) -> None:
        """One forward pass without gradients, so the first step does not pay for first-call set-up."""
        self.policy_logprobs(rollouts)

    def export_weights(self) -> dict[str, np.ndarray]:
        """The current weights as numpy arrays keyed by checkpoint name (what the generator reloads)."""
        # Copies: the arrays must not change under a caller when the next step updates the model in place.
        return {k: v.detach().to("cpu").numpy().copy() for k, v in self._model.state_dict().items()}

    def save_checkpoint(self, path: str | Path, version: int) -> None:
        """Weights, AdamW state and the policy ``version`` (updates done) in one file, written atomically,
        so ``--resume`` of an async run continues from this exact policy and optimizer."""
        with atomic_writer(path) as f:  # streamed to the temporary file, not built in memory first
            torch.save({"version": version, "model": self._model.state_dict(), "optimizer": self._opt.state_dict()}, f)

    def load_checkpoint(self, path: str | Path) -> int:
        """Restore what ``save_checkpoint`` wrote; returns the policy version it holds."""
        state = torch.load(str(path), map_location=self._device, weights_only=True)
        self._model.load_state_dict(state["model"])
        self._opt.load_state_dict(state["optimizer"])
        return int(state["version"])

    def close(self) -> None:
        self._model = None


def _mean_std(values: list[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values))
