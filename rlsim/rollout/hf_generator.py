"""Hugging Face ``generate`` fallback: no vLLM needed, slower (no paged KV cache, no continuous batching).

Requests are grouped by response length (``min_new_tokens == max_new_tokens`` must be one value per
``generate`` call), shortest first, so streaming hands back short rollouts early as vLLM would.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

from rlsim.errors import RlsimError
from rlsim.rollout.generator import GeneratorSettings, SyncResult, register_generator
from rlsim.rollout.prompts import encode_prompt
from rlsim.rollout.types import Rollout, RolloutRequest
from rlsim.torch_setup import prepare_torch


@register_generator("hf")
class HfGenerator:
    """``AutoModelForCausalLM.generate`` on CPU or CUDA, batched per response length."""

    name = "hf"

    def __init__(self, policy_dir: Path, settings: GeneratorSettings, max_batch: int = 64) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.settings = settings
        self._device = prepare_torch(settings.device, "policy.device", settings.threads, settings.seed)
        dtype = getattr(torch, settings.dtype)
        self._model = AutoModelForCausalLM.from_pretrained(str(policy_dir), dtype=dtype).eval().to(self._device)
        self._tokenizer = AutoTokenizer.from_pretrained(str(policy_dir))
        self._pad = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        self._max_batch = max_batch

    def generate(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        order = {r.uid: i for i, r in enumerate(requests)}
        done = [r for batch in self.stream(requests, micro_batch=max(1, len(requests))) for r in batch]
        return sorted(done, key=lambda r: order[r.uid])

    def stream(self, requests: Sequence[RolloutRequest], micro_batch: int) -> Iterator[list[Rollout]]:
        by_length: dict[int, list[RolloutRequest]] = defaultdict(list)
        for req in requests:
            by_length[req.response_tokens].append(req)
        buffer: list[Rollout] = []
        for length in sorted(by_length):
            group = by_length[length]
            for i in range(0, len(group), self._max_batch):
                buffer.extend(self._generate_same_length(group[i : i + self._max_batch], length))
                while len(buffer) >= micro_batch:
                    yield buffer[:micro_batch]
                    buffer = buffer[micro_batch:]
        if buffer:
            yield buffer

    def _generate_same_length(self, requests: list[RolloutRequest], length: int) -> list[Rollout]:
        import torch

        prompts = [encode_prompt(self._tokenizer, r, self.settings.max_model_len) for r in requests]
        width = max(len(p) for p in prompts)
        # Left padding keeps every prompt's last token at the same position, as generate expects.
        ids = torch.tensor([[self._pad] * (width - len(p)) + p for p in prompts], device=self._device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self._device)
        sample = self.settings.temperature > 0
        with torch.inference_mode():
            out = self._model.generate(
                input_ids=ids,
                attention_mask=mask,
                min_new_tokens=length,
                max_new_tokens=length,
                do_sample=sample,
                temperature=self.settings.temperature if sample else None,
                top_p=self.settings.top_p if sample else None,
                pad_token_id=self._pad,
            )
        responses = out[:, width:].tolist()
        return [
            Rollout(r.uid, r.group, p, resp[:length]) for r, p, resp in zip(requests, prompts, responses, strict=True)
        ]

    def load_weights(self, weights_dir: Path) -> SyncResult:
        from safetensors.torch import load_file

        t0 = time.perf_counter()
        state = {}
        for path in sorted(weights_dir.glob("*.safetensors")):
            state.update(load_file(str(path), device=str(self._device)))
        missing, unexpected = self._model.load_state_dict(state, strict=False)
        # A tied lm_head is not saved separately; anything else missing means the wrong weights were sent.
        if unexpected or set(missing) - {"lm_head.weight"}:
            raise RlsimError(
                f"weights in {weights_dir} do not match the policy (missing {missing[:3]}, unexpected "
                f"{unexpected[:3]}); the trainer and the generator must load the same policy model"
            )
        return SyncResult("hf-load", time.perf_counter() - t0, "load_state_dict from safetensors")

    def close(self) -> None:
        self._model = None
