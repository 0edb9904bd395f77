"""Forward-pass FLOPs of a reward model, to express throughput as a fraction of the GEMM rate.

Counted (multiply-add = 2 FLOPs), per sequence of ``s`` real tokens:

- the weight matmuls: ``2 x P x s`` where ``P`` is the matmul parameters a token passes through;
  BERT-style layer: ``4 h^2`` (Q, K, V, output) + ``2 h I`` (MLP up, down);
  Llama-style layer: ``2 h (heads x head_dim)`` (Q, output) + ``2 h (kv_heads x head_dim)`` (K, V)
  + ``3 h I`` (gated MLP: gate, up, down);
- attention scores and the weighted sum: ``4 x s^2 x (heads x head_dim)`` per layer
  (``QK^T`` and ``AV``, each ``2 s^2 d``).

Not counted: embeddings (lookups), layer norms, activations, softmax, the pooler and the scalar
head (under 0.1% of the total for MiniLM at 128 tokens). Padding tokens are *not* counted: the
fraction measures useful work, so padding waste shows up as a lower fraction.

Check against a known figure: MiniLM-L6 (h=384, I=1536, 6 layers) at 128 tokens gives
2 x 10.6M x 128 + 6 x 4 x 128^2 x 384 = 2.72 + 0.15 = 2.87 GFLOP (about 2.9, as ENVIRONMENT.md says).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError

BERT_LIKE = {"bert", "roberta", "xlm-roberta", "camembert", "mpnet", "ernie"}
LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "olmo", "granite"}


@dataclass(frozen=True)
class TransformerShape:
    """The sizes that set the FLOPs; ``gated_mlp`` is True for Llama-style (gate, up, down) MLPs."""

    model_type: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    gated_mlp: bool

    @property
    def matmul_params(self) -> int:
        """Weight-matmul parameters one token passes through, all layers."""
        h, attn, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        mlp = (3 if self.gated_mlp else 2) * h * self.intermediate
        return self.layers * (2 * h * attn + 2 * h * kv + mlp)


def shape_from_config(config: dict[str, Any]) -> TransformerShape:
    """Read a Hugging Face ``config.json`` dict; raises ``RlsimError`` for unknown model types."""
    cfg = config.get("text_config", config)
    model_type = str(cfg.get("model_type", config.get("model_type", "unknown")))
    if model_type not in BERT_LIKE | LLAMA_LIKE:
        known = ", ".join(sorted(BERT_LIKE | LLAMA_LIKE))
        raise RlsimError(f"no FLOP estimate for model_type {model_type!r} (known: {known})")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    return TransformerShape(
        model_type=model_type,
        layers=int(cfg["num_hidden_layers"]),
        hidden=hidden,
        intermediate=int(cfg["intermediate_size"]),
        heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        gated_mlp=model_type in LLAMA_LIKE,
    )


def shape_of_model(path: str | Path) -> TransformerShape:
    """``shape_from_config`` of ``path/config.json``."""
    cfg = Path(path) / "config.json"
    try:
        return shape_from_config(json.loads(cfg.read_text()))
    except (OSError, json.JSONDecodeError, KeyError) as err:
        raise RlsimError(f"cannot read the model shape from {cfg}: {err!r}") from None


def flops_per_sequence(shape: TransformerShape, tokens: int) -> float:
    """Forward FLOPs for one sequence of ``tokens`` real tokens."""
    attention = 4.0 * shape.layers * tokens * tokens * shape.heads * shape.head_dim
    return 2.0 * shape.matmul_params * tokens + attention


def workload_flops(shape: TransformerShape, lengths: Sequence[int]) -> float:
    """Sum of ``flops_per_sequence`` over real token lengths (padding excluded)."""
    return float(sum(flops_per_sequence(shape, int(n)) for n in lengths))
