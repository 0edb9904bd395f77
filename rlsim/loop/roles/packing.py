"""Rollouts packed into padded token tensors, shared by the trainer, the critic and the reference.

Position ``t`` of a causal model predicts token ``t + 1``, so a rollout's response tokens are
predicted at positions ``len(prompt) - 1 .. len(seq) - 2``: ``mask`` ``(b, L - 1)`` marks them, and
every per-token quantity (log-prob, value, advantage) is a flat ``(n_tokens,)`` tensor in the order
``tensor[mask]`` gives: row by row, each row's response tokens in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rlsim.rollout.types import Rollout

if TYPE_CHECKING:
    import torch


@dataclass
class Packed:
    """``ids``/``attn`` ``(b, L)`` right-padded; ``mask`` ``(b, L-1)``; ``targets`` ``(n_tokens,)``."""

    uids: list[int]
    lengths: list[int]  # response tokens per row
    ids: torch.Tensor
    attn: torch.Tensor
    mask: torch.Tensor
    targets: torch.Tensor
    extra: dict[str, Any]  # per-token inputs a role attaches (old log-probs, advantages, ...)

    @property
    def tokens(self) -> int:
        return int(self.targets.numel())

    def flat(self, per_uid: Mapping[int, np.ndarray]) -> torch.Tensor:
        """Per-uid arrays joined into one ``(n_tokens,)`` float32 tensor in this batch's token order."""
        import torch

        joined = np.concatenate([np.asarray(per_uid[u], dtype=np.float32) for u in self.uids])
        return torch.from_numpy(joined).to(self.ids.device)

    def split(self, flat: torch.Tensor) -> dict[int, np.ndarray]:
        """A ``(n_tokens,)`` tensor back to one float32 array per uid."""
        parts = flat.detach().float().cpu().numpy()
        out, start = {}, 0
        for u, n in zip(self.uids, self.lengths, strict=True):
            out[u] = parts[start : start + n].copy()
            start += n
        return out


def check_tokens(rollouts: Sequence[Rollout]) -> None:
    """Raise ``ValueError`` on a rollout without prompt or response tokens (nothing to predict from or score)."""
    for x in rollouts:
        if not x.prompt_ids or not x.response_ids:
            raise ValueError(
                f"rollout {x.uid} has {len(x.prompt_ids)} prompt and {len(x.response_ids)} response "
                "tokens; both must be at least 1"
            )


def pack(rollouts: Sequence[Rollout], pad_id: int, device: Any) -> Packed:
    """One micro-batch; raises ``ValueError`` on a rollout without prompt or response tokens."""
    import torch

    check_tokens(rollouts)
    width = max(x.num_tokens for x in rollouts)
    ids = torch.full((len(rollouts), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rollouts), width), dtype=torch.long)
    mask = torch.zeros((len(rollouts), width - 1), dtype=torch.bool)
    for i, x in enumerate(rollouts):
        seq = x.prompt_ids + x.response_ids
        ids[i, : len(seq)] = torch.tensor(seq)
        attn[i, : len(seq)] = 1
        mask[i, len(x.prompt_ids) - 1 : len(seq) - 1] = True
    targets = ids[:, 1:][mask]
    return Packed(
        [x.uid for x in rollouts],
        [len(x.response_ids) for x in rollouts],
        ids.to(device),
        attn.to(device),
        mask.to(device),
        targets.to(device),
        {},
    )


def micro_batches(rollouts: Sequence[Rollout], size: int, pad_id: int, device: Any) -> list[Packed]:
    """``rollouts`` sorted by length and cut into packed micro-batches of ``size``, so similar
    lengths share a batch and little compute goes to padding."""
    order = sorted(rollouts, key=lambda x: x.num_tokens)
    return [pack(order[j : j + size], pad_id, device) for j in range(0, len(order), size)]


def mini_batch_split(rollouts: Sequence[Rollout], size: int | None) -> list[list[Rollout]]:
    """``rollouts`` in order, cut into mini-batches of ``size`` (None: one); raises ``ValueError`` when
    ``size`` does not divide the batch (every optimizer step sees the same number of rollouts)."""
    if size is None:
        return [list(rollouts)]
    if size < 1 or len(rollouts) % size:
        raise ValueError(f"a mini-batch of {size} rollouts does not divide the batch of {len(rollouts)}")
    return [list(rollouts[i : i + size]) for i in range(0, len(rollouts), size)]


def pad_id(config: Any) -> int:
    """The model's pad token id, 0 when it has none (padding is masked out either way)."""
    return config.pad_token_id if config.pad_token_id is not None else 0


def response_hidden(backbone: Any, b: Packed) -> torch.Tensor:
    """The backbone's last hidden state at the positions predicting response tokens, ``(n_tokens, hidden)``."""
    hidden = backbone(input_ids=b.ids, attention_mask=b.attn, use_cache=False).last_hidden_state
    return hidden[:, :-1][b.mask]


def response_logprobs(model: Any, b: Packed, with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of each response token under a causal LM ``(n_tokens,)`` float32, and optionally the
    entropy of its next-token distribution there (detached: reported, never trained on).

    The vocabulary projection runs on response positions only: with a 30k vocabulary it is most of
    a small model's compute and memory, and prompt and padding positions are never used.
    """
    import torch.nn.functional as F

    from rlsim.algorithms.losses import entropy_from_logits

    logits = model.get_output_embeddings()(response_hidden(model.base_model, b)).float()
    logp = -F.cross_entropy(logits, b.targets, reduction="none")
    return logp, (entropy_from_logits(logits.detach()) if with_entropy else None)
