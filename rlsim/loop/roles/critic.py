"""The PPO critic: the policy's architecture with a scalar value head, initialised from the policy.

As OpenRLHF and verl build it: the causal LM's backbone (``AutoModel`` loads it from the policy's
checkpoint, dropping the LM head) plus ``Linear(hidden, 1)``, seeded. The value of response token
``t`` is read at the position that predicts it (the state before the token is chosen), the same
alignment as the policy's log-probs. ``values`` runs in the experience phase; ``update`` takes the
returns from GAE and the values seen then, and per epoch makes one clipped-value-loss optimizer step
per mini-batch with the critic's own AdamW. The critic's mini-batches and epochs are the actor's, as
verl's critic defaults them (``verl/trainer/config/critic/critic.yaml``: ``ppo_mini_batch_size`` and
``ppo_epochs`` select the actor's) and OpenRLHF's critic reads the same replay buffer and
``max_epochs`` (``openrlhf/trainer/ray/ppo_critic.py`` ``ppo_train``). Plain torch, no Ray.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlsim.algorithms.losses import clipped_value_loss
from rlsim.loop.roles.packing import Packed, micro_batches, mini_batch_split, pad_id, response_hidden
from rlsim.rollout.types import Rollout
from rlsim.torch_setup import prepare_torch


@dataclass(frozen=True)
class CriticSettings:
    """``lr`` for AdamW; ``value_clip``: how far a value may move from the collected one (None: no clip);
    ``mini_batch_size``: rollouts per optimizer step (None: the whole batch), the trainer's."""

    lr: float = 1e-5
    value_clip: float | None = 0.2
    epochs: int = 1
    micro_batch: int = 16
    max_grad_norm: float = 1.0
    device: str = "cpu"
    threads: int | None = None
    seed: int = 0
    mini_batch_size: int | None = None


@dataclass
class CriticStats:
    """One critic update: ``value_loss`` the last epoch's token-mean loss (the mean over its
    mini-batches), seconds of wall time; ``step_seconds`` each optimizer step's forward, backward and
    step, ``optimizer_seconds`` the gradient clip and AdamW step alone."""

    value_loss: float
    value_clip_fraction: float
    grad_norm: float
    response_tokens: int
    seconds: float
    optimizer_steps: int = 1
    step_seconds: list[float] | None = None
    optimizer_seconds: list[float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class CriticModel:
    """Backbone + value head in fp32; ``values`` (no grad) and ``update`` (in place)."""

    def __init__(self, source_dir: Path, settings: CriticSettings) -> None:
        from transformers import AutoModelForCausalLM

        self.settings = settings
        self._device = prepare_torch(settings.device, "critic.device", settings.threads, settings.seed)
        # The causal LM's backbone (``base_model``), loaded as the checkpoint was saved: ``AutoModel`` on a causal-LM
        # folder drops its ``lm_head`` and transformers 5 prints a "LOAD REPORT" table for it on every load
        # (`rlsim profile` times the critic six times), while the report stays on for a checkpoint really amiss.
        causal = AutoModelForCausalLM.from_pretrained(str(source_dir), dtype=torch.float32)
        self._backbone: Any = causal.base_model.to(self._device)
        hidden = int(causal.config.hidden_size)
        head = torch.nn.Linear(hidden, 1).to(self._device)
        # OpenRLHF's value-head init: small weights, so the first values are near 0, not of order 1.
        gen = torch.Generator().manual_seed(settings.seed)
        with torch.no_grad():
            head.weight.copy_(torch.randn(head.weight.shape, generator=gen) / (hidden + 1))
            head.bias.zero_()
        self._head: torch.nn.Linear | None = head  # None once closed
        self._backbone.train()
        params = list(self._backbone.parameters()) + list(head.parameters())
        self._params = params
        self._opt = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
        self._pad = pad_id(self._backbone.config)

    def _values(self, b: Packed) -> Any:
        assert self._head is not None, "the critic is closed"
        return self._head(response_hidden(self._backbone, b)).squeeze(-1).float()

    def values(self, rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
        """Per uid, float32 ``(len(response),)``: the value of the state before each response token."""
        out: dict[int, np.ndarray] = {}
        with torch.no_grad():
            for b in micro_batches(rollouts, self.settings.micro_batch, self._pad, self._device):
                out.update(b.split(self._values(b)))
        return out

    def update(
        self, rollouts: Sequence[Rollout], returns: Mapping[int, np.ndarray], old_values: Mapping[int, np.ndarray]
    ) -> CriticStats:
        """Fit the values to ``returns`` (from GAE); ``old_values``: what ``values`` gave in the experience phase."""
        t0 = time.perf_counter()
        missing = [x.uid for x in rollouts if x.uid not in returns or x.uid not in old_values]
        if missing:
            raise ValueError(f"{len(missing)} rollouts have no returns or old values (first uids {missing[:5]})")
        parts = [
            micro_batches(part, self.settings.micro_batch, self._pad, self._device)
            for part in mini_batch_split(rollouts, self.settings.mini_batch_size)
        ]
        for b in (b for part in parts for b in part):
            b.extra["returns"], b.extra["old"] = b.flat(returns), b.flat(old_values)
        step_s: list[float] = []
        opt_s: list[float] = []
        for _ in range(self.settings.epochs):
            loss_sum, clipped, norms = 0.0, 0.0, []
            for part in parts:
                t_step = time.perf_counter()
                part_loss, part_clipped = self._backward(part)
                loss_sum, clipped = loss_sum + part_loss, clipped + part_clipped
                t_opt = time.perf_counter()
                norms.append(float(torch.nn.utils.clip_grad_norm_(self._params, self.settings.max_grad_norm)))
                self._opt.step()
                self._opt.zero_grad(set_to_none=True)
                opt_s.append(time.perf_counter() - t_opt)
                step_s.append(time.perf_counter() - t_step)
        total = sum(b.tokens for part in parts for b in part)
        return CriticStats(
            value_loss=loss_sum / len(parts),
            value_clip_fraction=clipped / max(total, 1),
            grad_norm=float(np.mean(norms)),
            response_tokens=total,
            seconds=time.perf_counter() - t0,
            optimizer_steps=len(step_s),
            step_seconds=[round(x, 6) for x in step_s],
            optimizer_seconds=[round(x, 6) for x in opt_s],
        )

    def _backward(self, batches: list[Packed]) -> tuple[float, float]:
        """Forward and backward of one mini-batch's clipped value loss, its token mean; the loss and
        the count of clipped tokens."""
        total = sum(b.tokens for b in batches)
        loss_sum, clipped = 0.0, 0.0
        for b in batches:
            loss, was_clipped = clipped_value_loss(
                self._values(b), b.extra["old"], b.extra["returns"], self.settings.value_clip
            )
            # Summed over the micro-batch's tokens / the mini-batch's: the gradient of one mean over it.
            part = loss.sum() / total
            part.backward()
            loss_sum += float(part.detach())
            clipped += float(was_clipped.sum())
        return loss_sum, clipped

    def close(self) -> None:
        self._backbone = None
        self._head = None
