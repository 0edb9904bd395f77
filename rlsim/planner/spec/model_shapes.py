"""Policy architectures from their public configs, and the FLOPs and bytes one token costs them.

A dense decoder (Llama, Qwen) is fully described, for cost purposes, by the fields of its Hugging Face
``config.json``: ``num_hidden_layers``, ``hidden_size``, ``intermediate_size`` (gated SwiGLU MLP: three
matrices), ``num_attention_heads``, ``num_key_value_heads`` (grouped-query attention), ``head_dim`` and
``vocab_size``. From them (the accounting of Megatron-LM's ``num_floating_point_operations`` in
``megatron/training/training.py``, carried over, not copied):

- matrix parameters per layer ``h x d x (2 n_q + 2 n_kv) + 3 h I`` (q, k, v, o; gate, up, down);
- forward FLOPs per token ``2 x (layers x per-layer params + V h)`` (the LM head) plus attention
  ``4 x layers x n_q x d x context`` (QK^T and AV over ``context`` keys);
- KV cache ``2 x layers x n_kv x d x bytes`` per token; the weights a decode iteration reads are the
  matrix parameters and the LM head (the embedding is a row lookup).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rlsim.errors import RlsimError


class ModelShape(BaseModel):
    """A dense decoder's shape (units: counts of layers/heads/features; parameters in elements)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1)
    intermediate: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    vocab: int = Field(ge=1)
    tied_embeddings: bool = False
    source: str = Field(default="", description="the public config.json the numbers are read from")

    @property
    def layer_params(self) -> int:
        """Matrix parameters of one transformer layer (norms are negligible and left out)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return attn + 3 * self.hidden * self.intermediate

    @property
    def matmul_params(self) -> int:
        """Parameters every token multiplies by: all layers plus the LM head."""
        return self.layers * self.layer_params + self.vocab * self.hidden

    @property
    def params(self) -> int:
        """All parameters (the embedding counted once more unless it is tied to the LM head)."""
        return self.matmul_params + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def forward_flops(self, context: float) -> float:
        """FLOPs of one token's forward pass attending over ``context`` keys (its own included)."""
        return 2.0 * self.matmul_params + 4.0 * self.layers * self.heads * self.head_dim * context

    def sequence_forward_flops(self, tokens: float) -> float:
        """Forward FLOPs of a whole sequence of ``tokens`` under a causal mask (mean context (S+1)/2)."""
        return tokens * self.forward_flops((tokens + 1.0) / 2.0)

    def kv_bytes_per_token(self, bytes_per_value: float = 2.0) -> float:
        """KV-cache bytes one token of context holds over all layers (keys and values)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * bytes_per_value

    def weight_bytes(self, bytes_per_param: float = 2.0) -> float:
        """Bytes of all weights (what a refit moves and what an engine must hold)."""
        return self.params * bytes_per_param

    def decode_weight_bytes(self, bytes_per_param: float = 2.0) -> float:
        """Weight bytes one decode iteration reads from HBM (the embedding table is only indexed)."""
        return self.matmul_params * bytes_per_param


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


# Every number is the named config.json's field of the same meaning (head_dim = hidden / heads where
# the config has no head_dim).
MODELS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape(
            name="llama-3.1-8b",
            layers=32,
            hidden=4096,
            intermediate=14336,
            heads=32,
            kv_heads=8,
            head_dim=128,
            vocab=128256,
            source=_hf("meta-llama/Llama-3.1-8B-Instruct"),
        ),
        ModelShape(
            name="llama-3.1-70b",
            layers=80,
            hidden=8192,
            intermediate=28672,
            heads=64,
            kv_heads=8,
            head_dim=128,
            vocab=128256,
            source=_hf("meta-llama/Llama-3.1-70B-Instruct"),
        ),
        ModelShape(
            name="qwen2.5-7b",
            layers=28,
            hidden=3584,
            intermediate=18944,
            heads=28,
            kv_heads=4,
            head_dim=128,
            vocab=152064,
            source=_hf("Qwen/Qwen2.5-7B-Instruct"),
        ),
        ModelShape(
            name="qwen2.5-32b",
            layers=64,
            hidden=5120,
            intermediate=27648,
            heads=40,
            kv_heads=8,
            head_dim=128,
            vocab=152064,
            source=_hf("Qwen/Qwen2.5-32B-Instruct"),
        ),
        ModelShape(
            name="qwen3-32b",
            layers=64,
            hidden=5120,
            intermediate=25600,
            heads=64,
            kv_heads=8,
            head_dim=128,
            vocab=151936,
            source=_hf("Qwen/Qwen3-32B"),
        ),
    )
}


def model_shape(name: str) -> ModelShape:
    """The registered shape called ``name``; an unknown name lists the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise RlsimError(
            f"unknown model {name!r}: known models are {', '.join(sorted(MODELS))} "
            "(or give its shape inline: model: {name, layers, hidden, intermediate, heads, kv_heads, head_dim, vocab})"
        ) from None
