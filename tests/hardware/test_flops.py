"""FLOP estimates for BERT- and Llama-style reward models, checked against hand counts."""

from __future__ import annotations

import pytest

from rlsim.errors import RlsimError
from rlsim.hardware.flops import flops_per_sequence, shape_from_config, workload_flops

MINILM = {"model_type": "bert", "hidden_size": 384, "intermediate_size": 1536, "num_hidden_layers": 6,
          "num_attention_heads": 12}  # fmt: skip


def test_minilm_matches_hand_count() -> None:
    shape = shape_from_config(MINILM)
    # Per layer 4 x 384^2 + 2 x 384 x 1536 = 589,824 + 1,179,648 = 1,769,472; x 6 layers = 10,616,832.
    assert shape.matmul_params == 10_616_832
    # 2 x 10,616,832 x 128 = 2,717,908,992 plus attention 4 x 6 x 128^2 x 384 = 150,994,944.
    assert flops_per_sequence(shape, 128) == 2_717_908_992 + 150_994_944


def test_llama_counts_gated_mlp_and_grouped_kv() -> None:
    cfg = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
    shape = shape_from_config(cfg)
    # head_dim 64: Q,O 2 x 256 x 256 = 131,072; K,V 2 x 256 x 128 = 65,536; MLP 3 x 256 x 1024 = 786,432.
    assert shape.matmul_params == 4 * (131_072 + 65_536 + 786_432)
    # Attention width is heads x head_dim = 256: 4 x 4 x 10^2 x 256 = 409,600.
    assert flops_per_sequence(shape, 10) == 2 * shape.matmul_params * 10 + 409_600


def test_workload_sums_sequences() -> None:
    shape = shape_from_config(MINILM)
    assert workload_flops(shape, [128, 64]) == flops_per_sequence(shape, 128) + flops_per_sequence(shape, 64)


def test_unknown_model_type_is_named() -> None:
    with pytest.raises(RlsimError, match="no FLOP estimate for model_type 't5'"):
        shape_from_config({"model_type": "t5"})
