"""Small ONNX graphs for the native engine tests.

Hand-built graphs (``reward_graph``) compute a reward that can be worked out by hand,
``0.5 * sum(input_ids * attention_mask) + 1`` per row, and come in broken variants for the error
paths. A tiny BERT exported with torch (seeded, eager attention, opset 17, as rlsim's own export
does) gives a real transformer graph to compare with ONNX Runtime's Python API.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

TINY_VOCAB = 120


def expected_reward(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """What ``reward_graph`` computes: rows sum ids where the mask is 1, halve, add 1."""
    return (0.5 * (ids * mask).sum(axis=1) + 1.0).astype(np.float32)


def reward_graph(
    path: Path,
    *,
    id_type: int | None = None,
    token_type_ids: bool = False,
    extra_input: str | None = None,
    with_mask: bool = True,
    labels: int = 1,
    out_rank: int = 2,
    out_type: int | None = None,
    batch_dim: str | int = "batch",
) -> Path:
    """Save a small ONNX reward graph at ``path``; keyword arguments make it wrong in one way each.

    ``token_type_ids`` adds that input with weight 1000, so anything but zeros fed for it shows.
    """
    import onnx
    from onnx import TensorProto, helper

    id_type = TensorProto.INT64 if id_type is None else id_type
    out_type = TensorProto.FLOAT if out_type is None else out_type
    names = ["input_ids"] + (["attention_mask"] if with_mask else []) + (["token_type_ids"] if token_type_ids else [])
    names += [extra_input] if extra_input else []
    shape = [batch_dim, "seq"]
    inputs = [
        helper.make_tensor_value_info(n, id_type if n == "input_ids" else TensorProto.INT64, shape) for n in names
    ]
    nodes = [helper.make_node("Cast", [n], [f"{n}_f"], to=TensorProto.FLOAT) for n in names]
    masked = "attention_mask_f" if with_mask else "input_ids_f"
    nodes.append(helper.make_node("Mul", ["input_ids_f", masked], ["masked"]))
    total = "masked"
    if token_type_ids:
        nodes.append(helper.make_node("Mul", ["token_type_ids_f", "k1000"], ["tt"]))
        nodes.append(helper.make_node("Add", ["masked", "tt"], ["with_tt"]))
        total = "with_tt"
    nodes.append(helper.make_node("ReduceSum", [total, "axes"], ["row"], keepdims=1 if out_rank == 2 else 0))
    nodes.append(helper.make_node("Mul", ["row", "half"], ["scaled"]))
    nodes.append(helper.make_node("Add", ["scaled", "one"], ["reward"]))
    last = "reward"
    if labels > 1:
        nodes.append(helper.make_node("Concat", ["reward"] * labels, ["multi"], axis=1))
        last = "multi"
    if out_type != TensorProto.FLOAT:
        nodes.append(helper.make_node("Cast", [last], ["cast_out"], to=out_type))
        last = "cast_out"
    nodes.append(helper.make_node("Identity", [last], ["logits"]))
    out_shape = [batch_dim, labels] if out_rank == 2 else [batch_dim]
    consts = [
        helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
        helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
        helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
    ] + ([helper.make_tensor("k1000", TensorProto.FLOAT, [], [1000.0])] if token_type_ids else [])
    graph = helper.make_graph(
        nodes, "reward", inputs, [helper.make_tensor_value_info("logits", out_type, out_shape)], initializer=consts
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by any ONNX Runtime since 1.10
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def export_tiny_bert(path: Path, token_type_ids: bool) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=TINY_VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
    )
    model = BertForSequenceClassification._from_config(config, attn_implementation="eager").eval()
    ids = torch.randint(1, TINY_VOCAB, (2, 8))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0  # a padded row, so tracing keeps the general masking path
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_type_ids else [])
    args = (ids, mask, torch.zeros_like(ids)) if token_type_ids else (ids, mask)
    dynamic = {n: {0: "batch", 1: "seq"} for n in names} | {"logits": {0: "batch"}}
    # Tracing warns about data-dependent masking code; the padded dummy row keeps the general path.
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            str(path),
            input_names=names,
            output_names=["logits"],
            dynamic_axes=dynamic,
            opset_version=17,
            dynamo=False,
        )
    return path


def random_batch(batch: int, seq: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """int64 ids in [1, TINY_VOCAB) and a mask whose rows have varied real lengths (>= 1)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, TINY_VOCAB, size=(batch, seq), dtype=np.int64)
    lengths = rng.integers(1, seq + 1, size=batch)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    return ids * mask, mask
