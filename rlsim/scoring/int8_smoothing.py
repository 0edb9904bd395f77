"""SmoothQuant-style smoothing of a plain fp32 ONNX graph before int8 quantization.

SmoothQuant (Xiao et al. 2022, "SmoothQuant: Accurate and Efficient Post-Training Quantization for Large Language
Models", arXiv 2211.10438) moves the range of outlier activation channels into the weights, which per-channel
int8 handles well: for a weight MatMul ``Y = X W`` (X ``(..., C)``, W ``(C, N)``) and each input channel ``j``,
``s_j = max|X_j| ** alpha / max|W_j| ** (1 - alpha)``, ``X' = X / s`` and ``W' = diag(s) W``, so ``X' W' = X W``.
``alpha`` (0, 1] says how much of the difficulty moves to the weights (0.5: the paper's default).

ONNX Runtime has the same transform behind ``quantize_static(extra_options={"SmoothQuant": True,
"SmoothQuantAlpha": a})`` (``onnxruntime/quantization/quantize.py``), but it imports Intel Neural Compressor's
``ORTSmoothQuant``, which rlsim does not depend on; this is the transform itself, on the graph alone:

- ``max|X_j|`` comes from running the plain graph (one thread, no graph rewrites) over the calibration batches, so
  the statistics are from the calibration split only, padded positions included as ORT's own calibrator sees them;
- MatMuls that read one activation tensor (a block's query/key/value) share one ``s``, with ``max|W_j|`` taken over
  all their weights, so one ``Mul`` by ``1 / s`` feeds them all; the activation's other readers (a residual
  ``Add``) still read the unscaled tensor;
- only MatMuls whose second input is a 2-D weight read by no other node are smoothed (``Gemm`` heads and
  activation x activation MatMuls are left as they are); ``s`` is clipped below at 1e-5 as in Neural Compressor,
  and a channel that is all zero in X or W keeps ``s = 1``.

Without quantization the smoothed graph gives the plain graph's rewards to float rounding (the tests check 1e-5).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlsim.corpus.fidelity_corpus import calibration_texts
from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.paths import build_folder_once, cache_dir
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.export import export_reward_model
from rlsim.scoring.tokenizing import load_reward_tokenizer

MIN_SCALE = 1e-5
SMOOTH_VERSION = "v1"
CALIBRATION_TEXTS = 64
CALIBRATION_BATCH = 8
SMOOTHED = "model.smoothed.onnx"
RECORD = "smoothing.json"


def calibration_batches(spec: RewardModelSpec, count: int = CALIBRATION_TEXTS) -> list[dict[str, np.ndarray]]:
    """``count`` texts of the calibration split as model inputs, ``CALIBRATION_BATCH`` per batch, padded to the
    batch's longest and cut at the model's own limit: ``{"input_ids", "attention_mask"}``, int64 ``(batch, seq)``."""
    tokenizer = load_reward_tokenizer(spec, ScorerSettings())
    texts = calibration_texts(count)
    out = []
    for i in range(0, len(texts), CALIBRATION_BATCH):
        enc = tokenizer(texts[i : i + CALIBRATION_BATCH], padding=True, truncation=True, max_length=spec.max_length,
                        return_tensors="np")  # fmt: skip
        out.append({k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask")})
    return out


def smoothed_graph(spec: RewardModelSpec, alpha: float, count: int = CALIBRATION_TEXTS) -> tuple[Path, dict]:
    """The model's plain fp32 graph smoothed with ``alpha`` on ``count`` calibration texts (built once, cached
    under ``<model key>-smoothed-v1-a<alpha>-c<count>``), and what was smoothed."""
    out = cache_dir() / "onnx" / f"{spec.key}-smoothed-{SMOOTH_VERSION}-a{float(alpha)!r}-c{count}"

    def build(tmp: Path) -> None:
        record = smooth_graph(export_reward_model(spec).plain, tmp / SMOOTHED, calibration_batches(spec, count), alpha)
        (tmp / RECORD).write_text(json.dumps({"model": spec.name, "texts": count, **record}, indent=2))

    build_folder_once(out, lambda d: (d / SMOOTHED).is_file() and (d / RECORD).is_file(), build)
    return out / SMOOTHED, json.loads((out / RECORD).read_text())


def smoothable_matmuls(model: Any) -> dict[str, list[Any]]:
    """``{activation tensor: the MatMul nodes reading it with a 2-D weight of their own}``, in graph order."""
    weights = {init.name: init for init in model.graph.initializer}
    readers: dict[str, int] = {}
    for node in model.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    groups: dict[str, list[Any]] = {}
    for node in model.graph.node:
        if node.op_type != "MatMul" or len(node.input) != 2:
            continue
        x, w = node.input
        # A name is needed to record what was smoothed, and to place the Mul before the first reader.
        if w in weights and len(weights[w].dims) == 2 and readers[w] == 1 and x not in weights and node.name:
            groups.setdefault(x, []).append(node)
    return groups


def activation_channel_max(graph: Path, tensors: Sequence[str], batches: Sequence[dict[str, np.ndarray]]) -> dict:
    """``{tensor: max |x| per last-axis channel, float64 (C,)}`` over every batch, from ``graph`` in fp32."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(graph))
    have = {o.name for o in model.graph.output}
    for name in tensors:
        if name not in have:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    # No rewrites: the tensors asked for exist as named; one thread: the same maxima on any machine load.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}
    maxima: dict[str, np.ndarray] = {}
    for batch in batches:
        values = session.run(list(tensors), {k: v for k, v in batch.items() if k in inputs})
        for name, value in zip(tensors, values, strict=True):
            m = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0).astype(np.float64)
            maxima[name] = m if name not in maxima else np.maximum(maxima[name], m)
    return maxima


def smoothing_scales(x_max: np.ndarray, w_max: np.ndarray, alpha: float) -> np.ndarray:
    """``s_j = max|X_j|^alpha / max|W_j|^(1-alpha)`` as float32 ``(C,)``; 1 where either side is all zero."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.power(x_max, alpha) / np.power(w_max, 1.0 - alpha)
    s = np.where((x_max > 0) & (w_max > 0), np.maximum(s, MIN_SCALE), 1.0)
    return s.astype(np.float32)


def smooth_graph(plain: Path, out: Path, batches: Sequence[dict[str, np.ndarray]], alpha: float) -> dict[str, Any]:
    """Write ``plain`` smoothed with ``alpha`` to ``out``; returns what was smoothed (JSON-ready).

    ``batches``: the calibration split's model inputs (``input_ids``, ``attention_mask``: int64 ``(batch, seq)``).
    """
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(plain))
    groups = smoothable_matmuls(model)
    if not groups:
        raise RlsimError(f"{plain} has no MatMul with a weight of its own: nothing for SmoothQuant to smooth")
    x_max = activation_channel_max(plain, list(groups), batches)
    weights = {init.name: init for init in model.graph.initializer}
    smoothed: list[dict[str, Any]] = []
    for k, (tensor, nodes) in enumerate(groups.items()):
        arrays = [numpy_helper.to_array(weights[n.input[1]]) for n in nodes]
        w_max = np.max([np.abs(w).max(axis=1) for w in arrays], axis=0).astype(np.float64)
        s = smoothing_scales(x_max[tensor], w_max, alpha)
        for node, w in zip(nodes, arrays, strict=True):
            weights[node.input[1]].CopyFrom(numpy_helper.from_array((w * s[:, None]).astype(w.dtype), node.input[1]))
        _insert_scale(model, tensor, nodes, (1.0 / s).astype(np.float32), f"smoothquant/{k}")
        smoothed.append({"activation": tensor, "matmuls": [n.name for n in nodes], "channels": int(s.size),
                         "scale_min": float(s.min()), "scale_max": float(s.max())})  # fmt: skip
    onnx.save(model, str(out))
    return {"alpha": alpha, "method": "SmoothQuant (Xiao et al. 2022, arXiv 2211.10438), rlsim.scoring.int8_smoothing",
            "activations": len(smoothed), "matmuls": sum(len(e["matmuls"]) for e in smoothed),
            "smoothed": smoothed}  # fmt: skip


def _insert_scale(model: Any, tensor: str, readers: list[Any], inverse: np.ndarray, name: str) -> None:
    """``tensor * inverse`` as a new tensor that ``readers`` read instead; the Mul goes just before the first of
    them, which keeps the node list in topological order."""
    import onnx
    from onnx import numpy_helper

    scale, scaled = f"{name}/inverse_scale", f"{name}/output"
    model.graph.initializer.append(numpy_helper.from_array(inverse, scale))
    for node in readers:
        node.input[0] = scaled
    names = {node.name for node in readers}
    first = min(i for i, node in enumerate(model.graph.node) if node.name in names)
    model.graph.node.insert(first, onnx.helper.make_node("Mul", [tensor, scale], [scaled], name=f"{name}/Mul"))
