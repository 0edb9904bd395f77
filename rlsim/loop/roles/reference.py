"""The reference model: a frozen copy of the initial policy, giving log-probs of response tokens for the KL.

Two runtimes, one interface (``ReferenceModel.logprobs``), so a Ray actor can hold either:

- ``eager``: the policy in torch, ``requires_grad`` off, no optimizer: nothing can move it.
- ``ort``: the exported graph (``rlsim.scoring.reference_export``) in ONNX Runtime, which gathers
  the response positions inside the graph and returns log-probs, never logits.

``native`` is refused: the native engine returns one float per sequence, not one per token.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from rlsim.errors import RlsimError
from rlsim.loop.roles.packing import check_tokens, micro_batches, pad_id, response_logprobs
from rlsim.rollout.types import Rollout
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.ort_scorer import ort_session
from rlsim.scoring.reference_export import check_reference_graph, export_reference
from rlsim.torch_setup import prepare_torch

ReferenceRuntime = Literal["eager", "ort", "native"]
NATIVE_REFUSED = (
    "the native engine returns one float per sequence (native_engine/src/engine.h), not the per-token "
    "log-probs the KL needs; use reference.runtime: ort (the same ONNX Runtime) or eager"
)


@dataclass(frozen=True)
class ReferenceSettings:
    """``micro_batch``: sequences per forward; ``threads``: torch / ORT intra-op threads (None: all cores);
    ``spinning``: ORT's threads spin between ops (``ScorerSettings``' default). Whether a spinning reference slows
    the critic beside it was measured and not settled (``benchmarks/roles_core_sharing.py``, benchmarks/README.md
    2026-12-06 14:08-14:14 UTC: one run for, one against), so the default stays ORT's."""

    runtime: ReferenceRuntime = "eager"
    micro_batch: int = 16
    device: str = "cpu"
    threads: int | None = None
    spinning: bool = True


class ReferenceModel(Protocol):
    settings: ReferenceSettings

    def logprobs(self, rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
        """Per uid, float32 ``(len(response),)``: log-prob of each response token under the reference."""
        ...

    def close(self) -> None: ...


class EagerReference:
    """The initial policy in torch, frozen."""

    def __init__(self, policy_dir: Path, settings: ReferenceSettings) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.settings = settings
        self._device = prepare_torch(settings.device, "reference.device", settings.threads)
        model = AutoModelForCausalLM.from_pretrained(str(policy_dir), dtype=torch.float32).to(self._device).eval()
        model.requires_grad_(False)
        self._model = model
        self._pad = pad_id(model.config)

    def logprobs(self, rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
        import torch

        out: dict[int, np.ndarray] = {}
        with torch.inference_mode():
            for b in micro_batches(rollouts, self.settings.micro_batch, self._pad, self._device):
                out.update(b.split(response_logprobs(self._model, b)[0]))
        return out

    def close(self) -> None:
        self._model = None


class OrtReference:
    """The exported reference graph in ONNX Runtime (CPU, or CUDA with onnxruntime-gpu)."""

    def __init__(self, policy_dir: Path, settings: ReferenceSettings) -> None:

        self.settings = settings
        self.graph_path = export_reference(policy_dir)
        check_reference_graph(self.graph_path)
        device: Literal["cpu", "cuda"] = "cuda" if settings.device == "cuda" else "cpu"
        self._session = ort_session(
            self.graph_path, ScorerSettings(device=device, threads=settings.threads, spinning=settings.spinning)
        )
        config = json.loads((policy_dir / "config.json").read_text())
        self._pad = config.get("pad_token_id") or 0

    def logprobs(self, rollouts: Sequence[Rollout]) -> dict[int, np.ndarray]:
        check_tokens(rollouts)
        out: dict[int, np.ndarray] = {}
        order = sorted(rollouts, key=lambda x: x.num_tokens)
        size = self.settings.micro_batch
        for part in (order[j : j + size] for j in range(0, len(order), size)):
            ids, mask, positions = self._feed(part)
            (logp,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "positions": positions})
            for i, x in enumerate(part):
                out[x.uid] = logp[i, : len(x.response_ids)].astype(np.float32)
        return out

    def _feed(self, part: Sequence[Rollout]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        width = max(x.num_tokens for x in part)
        resp = max(len(x.response_ids) for x in part)
        ids = np.full((len(part), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(part), width), dtype=np.int64)
        # Short rows repeat their last response position; the extra outputs are cut off above.
        positions = np.zeros((len(part), resp), dtype=np.int64)
        for i, x in enumerate(part):
            seq = x.prompt_ids + x.response_ids
            ids[i, : len(seq)] = seq
            mask[i, : len(seq)] = 1
            pos = np.arange(len(x.prompt_ids), len(seq))
            positions[i] = np.concatenate([pos, np.full(resp - len(pos), pos[-1])])
        return ids, mask, positions

    def close(self) -> None:
        self._session = None


def make_reference(policy_dir: Path, settings: ReferenceSettings) -> ReferenceModel:
    """The reference on ``settings.runtime``; ``native`` raises ``RlsimError`` saying why and what to use."""
    if settings.runtime == "native":
        raise RlsimError(f"reference.runtime native: {NATIVE_REFUSED}")
    if settings.runtime == "ort":
        return OrtReference(policy_dir, settings)
    if settings.runtime == "eager":
        return EagerReference(policy_dir, settings)
    raise RlsimError(f"unknown reference.runtime {settings.runtime!r}; valid: eager, ort")
