"""PyTorch runtimes: ``eager`` (inference_mode) and ``compile`` (torch.compile with length buckets)."""

from __future__ import annotations

import bisect
import time

import numpy as np

from rlsim.models.reward import RewardModelSpec
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer
from rlsim.scoring.needs import TORCH
from rlsim.scoring.tokenizing import EncodedBatch, TokenizingScorer
from rlsim.torch_setup import prepare_torch


@register_scorer("eager", RuntimeInfo(needs=TORCH))
class EagerScorer(TokenizingScorer):
    """The reference: the Hugging Face model in PyTorch eager mode, fp32, under ``inference_mode``."""

    name = "eager"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification

        super().__init__(model, settings)
        self._device = prepare_torch(
            settings.device, "the scorer's device (reward.device or --device)", settings.resolved_threads()
        )
        self._model = (
            AutoModelForSequenceClassification.from_pretrained(str(model.path), dtype=torch.float32)
            .eval()
            .to(self._device)
        )
        self._module = self._model

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        import torch

        ids = torch.from_numpy(batch.input_ids).to(self._device)
        mask = torch.from_numpy(batch.attention_mask).to(self._device)
        with torch.inference_mode():
            logits = self._module(input_ids=ids, attention_mask=mask).logits
        return logits[:, 0].float().cpu().numpy()


@register_scorer("compile", RuntimeInfo(needs=TORCH))
class CompiledScorer(EagerScorer):
    """``torch.compile`` of the same model.

    Sequence lengths are padded up to a bucket (``settings.compile_buckets``) so varied lengths
    compile once per bucket rather than once per length; the batch dimension becomes dynamic
    after its first change (dynamo's automatic dynamic shapes). Time spent in calls that
    compiled a new graph is counted in ``stats.compile_s``, apart from steady state.
    """

    name = "compile"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        import torch
        import torch._dynamo

        super().__init__(model, settings)
        self._buckets = sorted(b for b in settings.compile_buckets if b <= self.max_length)
        if not self._buckets or self._buckets[-1] < self.max_length:
            self._buckets.append(self.max_length)
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        self._module = torch.compile(self._model)

    def _pad_length(self, longest: int) -> int:
        return self._buckets[bisect.bisect_left(self._buckets, longest)]

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        from torch._dynamo.utils import counters

        before = counters["stats"]["unique_graphs"]
        t0 = time.perf_counter()
        out = super()._forward(batch)
        if counters["stats"]["unique_graphs"] != before:
            self.stats.compile_s += time.perf_counter() - t0
        return out
