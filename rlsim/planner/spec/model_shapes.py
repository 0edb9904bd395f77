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

A mixture-of-experts decoder (Qwen3-MoE: ``num_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
every layer sparse) replaces each layer's MLP by ``experts`` gated MLPs of ``expert_intermediate`` and a router
(``h x experts``). A token multiplies by the router and ``experts_per_token`` experts only (the *active*
parameters, which set FLOPs); an engine holds all of them, and a decode iteration of ``n`` requests reads the
experts its tokens were routed to: with routing spread evenly (as Megatron-Bridge's MoE benchmarks force it),
``experts x (1 - (1 - k / experts)^n)`` per layer in expectation. Shared experts and multi-head latent attention
(DeepSeek-V3) are not expressed.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlsim.errors import RlsimError


class ModelShape(BaseModel):
    """A decoder's shape, dense or mixture of experts (units: counts of layers/heads/features; parameters in
    elements)."""

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
    experts: int = Field(default=0, ge=0, description="routed experts per layer; 0 for a dense model")
    experts_per_token: int = Field(default=0, ge=0)
    expert_intermediate: int = Field(default=0, ge=0)
    source: str = Field(default="", description="the public config.json the numbers are read from")

    @model_validator(mode="after")
    def _experts(self) -> ModelShape:
        if self.experts and not (1 <= self.experts_per_token <= self.experts and self.expert_intermediate >= 1):
            raise ValueError(
                f"{self.name}: a mixture-of-experts shape needs experts_per_token in 1..experts ({self.experts}) and "
                "expert_intermediate >= 1 (config.json: num_experts_per_tok, moe_intermediate_size)"
            )
        if not self.experts and (self.experts_per_token or self.expert_intermediate):
            raise ValueError(
                f"{self.name}: experts_per_token or expert_intermediate is set but experts is 0; give experts "
                "(config.json: num_experts) for a mixture of experts, or leave all three out for a dense model"
            )
        return self

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def _attention_params(self) -> int:
        return self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)

    @property
    def expert_params(self) -> int:
        """Parameters of one expert's gated MLP (gate, up, down)."""
        return 3 * self.hidden * self.expert_intermediate

    def _mlp_params(self, experts: int) -> int:
        if not self.is_moe:
            return 3 * self.hidden * self.intermediate
        return experts * self.expert_params + self.hidden * self.experts  # the experts used, and the router

    @property
    def layer_params(self) -> int:
        """Matrix parameters one transformer layer holds (norms are negligible and left out)."""
        return self._attention_params + self._mlp_params(self.experts)

    @property
    def matmul_params(self) -> int:
        """Matrix parameters of all layers plus the LM head: what an engine holds and a full read moves."""
        return self.layers * self.layer_params + self.vocab * self.hidden

    @property
    def active_matmul_params(self) -> int:
        """Parameters one token multiplies by (a MoE token: the router and its ``experts_per_token`` experts)."""
        per_layer = self._attention_params + self._mlp_params(self.experts_per_token)
        return self.layers * per_layer + self.vocab * self.hidden

    def experts_touched(self, tokens: float | np.ndarray) -> float | np.ndarray:
        """Expected distinct experts per layer that ``tokens`` tokens are routed to (evenly spread routing)."""
        if not self.is_moe:
            return 0.0
        return self.experts * (1.0 - (1.0 - self.experts_per_token / self.experts) ** np.asarray(tokens, float))

    @property
    def params(self) -> int:
        """All parameters (the embedding counted once more unless it is tied to the LM head)."""
        return self.matmul_params + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def forward_flops(self, context: float) -> float:
        """FLOPs of one token's forward pass attending over ``context`` keys (its own included)."""
        return 2.0 * self.active_matmul_params + 4.0 * self.layers * self.heads * self.head_dim * context

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
        """Weight bytes one decode iteration reads from HBM besides the experts (the embedding table is only
        indexed): all matrices of a dense model; a MoE model adds ``expert_bytes`` x experts touched."""
        experts = self.layers * self.experts * self.expert_params
        return (self.matmul_params - experts) * bytes_per_param

    def expert_bytes(self, bytes_per_param: float = 2.0) -> float:
        """Bytes of one expert in every layer: what each expert touched per layer adds to an iteration's read."""
        return self.layers * self.expert_params * bytes_per_param


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
        ModelShape(
            name="qwen3-30b-a3b",
            layers=48,
            hidden=2048,
            intermediate=6144,  # unused: every layer is sparse (decoder_sparse_step 1, mlp_only_layers [])
            heads=32,
            kv_heads=4,
            head_dim=128,
            vocab=151936,
            experts=128,
            experts_per_token=8,
            expert_intermediate=768,
            source=_hf("Qwen/Qwen3-30B-A3B"),
        ),
        ModelShape(
            name="qwen3-235b-a22b",
            layers=94,
            hidden=4096,
            intermediate=12288,  # unused, as above
            heads=64,
            kv_heads=4,
            head_dim=128,
            vocab=151936,
            experts=128,
            experts_per_token=8,
            expert_intermediate=1536,
            source=_hf("Qwen/Qwen3-235B-A22B"),
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
            "(or give its shape inline: model: {name, layers, hidden, intermediate, heads, kv_heads, head_dim, vocab}, "
            "and for a mixture of experts experts, experts_per_token, expert_intermediate)"
        ) from None
