"""A real GRPO update on a torch copy of the policy: the clipped surrogate on the rollouts' own tokens.

Per step: group-normalised advantages from the rewards; the behaviour log-probs recomputed by this
copy before the update (what OpenRLHF/verl do, since the engine's numerics differ slightly); then for
each epoch, forward + backward over micro-batches (gradient accumulation) and one optimizer step.
The loss is the token-level mean over all response tokens of the batch.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rlsim.loop.advantages import group_advantages
from rlsim.rollout.types import Rollout
from rlsim.torch_setup import prepare_torch


@dataclass(frozen=True)
class TrainerSettings:
    """``lr`` for AdamW; ``clip_eps`` the PPO ratio clip; ``micro_batch`` sequences per forward/backward."""

    lr: float = 1e-6
    clip_eps: float = 0.2
    epochs: int = 1
    micro_batch: int = 16
    max_grad_norm: float = 1.0
    normalize_std: bool = True
    device: str = "cpu"
    threads: int | None = None
    seed: int = 0


@dataclass
class TrainStats:
    """What one update did; ``loss`` is the last epoch's surrogate loss, times in seconds."""

    sequences: int
    response_tokens: int
    loss: float
    clip_fraction: float
    approx_kl: float
    grad_norm: float
    reward_mean: float
    reward_std: float
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class PolicyTrainer:
    """Holds the policy in torch (fp32) with an AdamW optimizer; ``train_step`` updates it in place."""

    def __init__(self, policy_dir: Path, settings: TrainerSettings) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.settings = settings
        self._device = prepare_torch(settings.device, "trainer.device", settings.threads, settings.seed)
        self._model = AutoModelForCausalLM.from_pretrained(str(policy_dir), dtype=torch.float32).to(self._device)
        self._model.train()
        # No weight decay: a step with zero advantages must leave the policy unchanged.
        self._opt = torch.optim.AdamW(self._model.parameters(), lr=settings.lr, weight_decay=0.0)
        config = self._model.config
        self._pad = config.pad_token_id if config.pad_token_id is not None else 0

    def train_step(self, rollouts: Sequence[Rollout], rewards: dict[int, float]) -> TrainStats:
        """One GRPO update on ``rollouts``; ``rewards`` maps each rollout's uid to its reward."""
        import torch

        t0 = time.perf_counter()
        missing = [r.uid for r in rollouts if r.uid not in rewards]
        if missing:
            raise RuntimeError(f"{len(missing)} rollouts have no reward (first uids {missing[:5]}); none may be lost")
        r = [float(rewards[x.uid]) for x in rollouts]
        adv = group_advantages([x.group for x in rollouts], r, self.settings.normalize_std)
        # Similar lengths share a micro-batch, so little compute goes to padding.
        order = sorted(range(len(rollouts)), key=lambda i: rollouts[i].num_tokens)
        size = self.settings.micro_batch
        parts = [order[j : j + size] for j in range(0, len(order), size)]
        batches = [self._pack([rollouts[i] for i in part], adv[part]) for part in parts]
        total_tokens = sum(int(b["targets"].numel()) for b in batches)
        with torch.no_grad():
            for b in batches:
                b["old"] = self._token_logprobs(b)
        for _ in range(self.settings.epochs):
            loss, clipped, kl = self._epoch(batches, total_tokens)
            norm = torch.nn.utils.clip_grad_norm_(self._model.parameters(), self.settings.max_grad_norm)
            self._opt.step()
            self._opt.zero_grad(set_to_none=True)
        return TrainStats(
            sequences=len(rollouts), response_tokens=total_tokens, loss=loss, clip_fraction=clipped,
            approx_kl=kl, grad_norm=float(norm), reward_mean=float(np.mean(r)), reward_std=float(np.std(r)),
            seconds=time.perf_counter() - t0,
        )

    def _epoch(self, batches: list[dict[str, Any]], total_tokens: int) -> tuple[float, float, float]:
        """Forward + backward over every micro-batch; returns (loss, clipped share, approx KL)."""
        import torch

        eps = self.settings.clip_eps
        loss_sum, clipped, kl = 0.0, 0.0, 0.0
        for b in batches:
            new = self._token_logprobs(b)
            ratio = torch.exp(new - b["old"])
            surrogate = torch.minimum(ratio * b["adv"], torch.clamp(ratio, 1 - eps, 1 + eps) * b["adv"])
            # Dividing by the whole batch's token count makes the accumulated gradient that of one
            # full-batch loss, whatever the micro-batch size.
            loss = -surrogate.sum() / total_tokens
            loss.backward()
            with torch.no_grad():
                loss_sum += float(loss)
                clipped += float(((ratio - 1).abs() > eps).sum())
                kl += float((b["old"] - new).sum())
        return loss_sum, clipped / max(total_tokens, 1), kl / max(total_tokens, 1)

    def _pack(self, rollouts: Sequence[Rollout], adv: np.ndarray) -> dict[str, Any]:
        """Right-padded ``ids``/``attn`` ``(b, L)``; ``mask`` ``(b, L-1)`` marks positions predicting a
        response token; ``targets`` and ``adv`` hold one entry per response token ``(n_tokens,)``."""
        import torch

        width = max(x.num_tokens for x in rollouts)
        ids = torch.full((len(rollouts), width), self._pad, dtype=torch.long)
        attn = torch.zeros((len(rollouts), width), dtype=torch.long)
        mask = torch.zeros((len(rollouts), width - 1), dtype=torch.bool)
        for i, x in enumerate(rollouts):
            seq = x.prompt_ids + x.response_ids
            ids[i, : len(seq)] = torch.tensor(seq)
            attn[i, : len(seq)] = 1
            # Position t predicts token t+1: response tokens sit at len(prompt)..len(seq)-1.
            mask[i, len(x.prompt_ids) - 1 : len(seq) - 1] = True
        targets = ids[:, 1:][mask]
        per_token_adv = torch.from_numpy(np.asarray(adv, dtype=np.float32))[:, None].expand_as(mask)[mask]
        dev = self._device
        return {"ids": ids.to(dev), "attn": attn.to(dev), "mask": mask.to(dev), "targets": targets.to(dev),
                "adv": per_token_adv.to(dev)}

    def _token_logprobs(self, b: dict[str, Any]) -> Any:
        """Log-prob of each response token under the current policy, ``(n_tokens,)`` float32.

        The vocabulary projection runs on response positions only: with a 30k vocabulary it is most
        of this model's compute and memory, and prompt and padding positions are never trained.
        """
        import torch.nn.functional as F

        hidden = self._model.model(input_ids=b["ids"], attention_mask=b["attn"]).last_hidden_state
        logits = self._model.lm_head(hidden[:, :-1][b["mask"]])
        return -F.cross_entropy(logits.float(), b["targets"], reduction="none")

    def warmup(self, rollouts: Sequence[Rollout]) -> None:
        """One forward pass without gradients, so the first step does not pay for first-call set-up."""
        import torch

        with torch.no_grad():
            self._token_logprobs(self._pack(list(rollouts), np.zeros(len(rollouts), dtype=np.float32)))

    def export_weights(self) -> dict[str, np.ndarray]:
        """The current weights as numpy arrays keyed by checkpoint name (what the generator reloads)."""
        # Copies: the arrays must not change under a caller when the next step updates the model in place.
        return {k: v.detach().to("cpu").numpy().copy() for k, v in self._model.state_dict().items()}

    def close(self) -> None:
        self._model = None
