"""Export a reward model to ONNX: plain graph, ORT-optimised graph (fusions) and int8 graph.

Files are cached under ``cache_dir()/onnx/<model key>/`` and reused; a lock makes concurrent
exports (bench subprocesses, Ray actors) safe. Inputs ``input_ids``/``attention_mask`` (int64,
dynamic ``batch`` and ``seq`` axes), output ``logits`` float32 ``(batch, 1)``.

Why eager attention: with the default SDPA attention the exported graph hides the attention
pattern and ORT's BERT optimizer fuses no Attention node; with eager attention it fuses
EmbedLayerNormalization, Attention, BiasGelu and SkipLayerNormalization (ENVIRONMENT.md).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlsim.errors import RlsimError
from rlsim.models.builtin import _locked
from rlsim.models.reward import RewardModelSpec
from rlsim.paths import cache_dir

if TYPE_CHECKING:
    import torch

EXPORT_VERSION = "v1"
OPSET = 17
# Model types whose graphs ORT's transformer optimizer knows how to fuse.
FUSABLE = {"bert": "bert", "roberta": "bert", "distilbert": "bert", "deberta-v2": "bert", "electra": "bert"}


@dataclass(frozen=True)
class ExportedModel:
    plain: Path
    optimized: Path
    int8: Path
    fusions: dict[str, int]
    export_s: float


def export_reward_model(spec: RewardModelSpec, out_dir: Path | None = None) -> ExportedModel:
    """Export ``spec`` once (cached) and return the three graph paths."""
    out = out_dir or cache_dir() / "onnx" / f"{spec.key}-{EXPORT_VERSION}"
    meta = out / "export.json"
    if meta.is_file():
        return _load(out, meta)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        # Never replace a folder this code did not make: it may hold the user's files.
        raise RlsimError(f"{out} exists and is not an rlsim export; pass --out with a new or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out.parent / f".{out.name}.lock"):
        if meta.is_file():
            return _load(out, meta)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            t0 = time.perf_counter()
            _export_plain(spec, tmp / "model.onnx")
            fusions = _optimize(spec, tmp / "model.onnx", tmp / "model.opt.onnx")
            _quantize(tmp / "model.onnx", tmp / "model.int8.onnx")
            info = {"model": spec.name, "fusions": fusions, "export_s": time.perf_counter() - t0, "opset": OPSET}
            (tmp / "export.json").write_text(json.dumps(info, indent=2))
            if out.exists():
                out.rmdir()  # empty (checked above); rename cannot replace a folder
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return _load(out, meta)


def _load(out: Path, meta: Path) -> ExportedModel:
    info = json.loads(meta.read_text())
    return ExportedModel(
        plain=out / "model.onnx",
        optimized=out / "model.opt.onnx",
        int8=out / "model.int8.onnx",
        fusions=info.get("fusions", {}),
        export_s=float(info.get("export_s", 0.0)),
    )


def _export_plain(spec: RewardModelSpec, path: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(spec.path), attn_implementation="eager").eval()
    # A dummy batch with padding, so traced masking code keeps the general (padded) path.
    ids = torch.ones((2, 16), dtype=torch.int64)
    mask = torch.ones((2, 16), dtype=torch.int64)
    mask[1, 10:] = 0
    if model.config.pad_token_id is not None:
        ids[1, 10:] = model.config.pad_token_id
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "logits": {0: "batch"}}
    with torch.inference_mode(), quiet_torchscript_export():
        torch.onnx.export(
            _LogitsOnly(model),
            (ids, mask),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
            dynamic_axes=dynamic,
            opset_version=OPSET,
            dynamo=False,
        )


@contextmanager
def quiet_torchscript_export() -> Iterator[None]:
    """Silence what torch and transformers say on every TorchScript ONNX export rlsim makes on purpose.

    rlsim uses the TorchScript exporter (``dynamo=False``): the dynamo exporter needs onnxscript and does not
    keep the padded attention path. torch warns about that choice (DeprecationWarnings), about how it lowers
    some operators (UserWarnings such as advanced indexing), and the tracer warns that Python-level branches
    become constants, which is what the padded dummy batch is for. Every export is checked against eager
    afterwards (``check_graph_matches``), so none of these is something a user can act on.
    """
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "You are using the legacy TorchScript-based ONNX export", DeprecationWarning)
        warnings.filterwarnings("ignore", module=r"torch\.onnx")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        yield


def _LogitsOnly(model: Any) -> torch.nn.Module:  # noqa: N802 - builds an nn.Module; torch is imported lazily
    """Wraps a HF model so tracing sees a plain (ids, mask) -> logits function."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask)
            return out[0] if isinstance(out, (tuple, list)) else out.logits

    return Wrapper(model)


def _optimize(spec: RewardModelSpec, plain: Path, out: Path) -> dict[str, int]:
    """Fuse transformer blocks where ORT knows the model type; else ORT's generic graph optimisations."""
    import onnxruntime as ort

    model_type = FUSABLE.get(spec.arch)
    if model_type:
        from onnxruntime.transformers.optimizer import optimize_model

        opt = optimize_model(
            str(plain), model_type=model_type, num_heads=spec.num_heads, hidden_size=spec.hidden_size, opt_level=1
        )
        opt.save_model_to_file(str(out))
        return {k: int(v) for k, v in opt.get_fused_operator_statistics().items() if v}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(out)
    ort.InferenceSession(str(plain), so, providers=["CPUExecutionProvider"])
    return {}


@contextmanager
def quantizer_input(graph: Path) -> Iterator[Path]:
    """A copy of ``graph`` in a temporary folder of its own, to hand ONNX Runtime's quantizers.

    ``quantize_dynamic`` and ``quantize_static`` write ``<name>-inferred.onnx`` beside their input and delete it
    (``onnxruntime/quantization/quant_utils.py`` ``load_model_with_shape_infer``), so two processes quantizing one
    cached graph at once (two runs, a verify beside a bench) delete each other's file mid-way: "No such file or
    directory: .../model-inferred.onnx". A copy per call costs one file copy."""
    with tempfile.TemporaryDirectory(prefix="rlsim-quantize-") as folder:
        copy = Path(folder) / graph.name
        shutil.copyfile(graph, copy)
        yield copy


def _quantize(plain: Path, out: Path) -> None:
    # Quantize the plain export: shape inference fails on the fused graph (ENVIRONMENT.md).
    from onnxruntime.quantization import QuantType, quantize_dynamic

    try:
        with quantizer_input(plain) as source:
            quantize_dynamic(str(source), str(out), weight_type=QuantType.QInt8)
    except Exception as err:  # a user's exotic model: say so, keep fp32 usable
        raise RlsimError(f"int8 quantization of {plain} failed ({err}); use the fp32 runtimes for this model") from err


def check_graph_matches(path: Path, spec: RewardModelSpec) -> None:
    """Raise a clear error when an ONNX file does not take our inputs or give one reward per row."""
    import onnx

    if not path.is_file():
        raise RlsimError(f"ONNX file {path} does not exist; run `rlsim export --model {spec.name}`")
    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as err:
        raise RlsimError(f"{path} is not a readable ONNX model ({err}); re-run `rlsim export`") from None
    inputs = {i.name for i in graph.input}
    missing = {"input_ids", "attention_mask"} - inputs
    if missing or len(graph.output) != 1:
        raise RlsimError(
            f"{path} does not match a reward model: inputs {sorted(inputs)}, {len(graph.output)} output(s); "
            "expected inputs input_ids and attention_mask and one logits output. Re-export with `rlsim export`"
        )
    dims = graph.output[0].type.tensor_type.shape.dim
    if len(dims) == 2 and dims[1].dim_value not in (0, 1):
        raise RlsimError(
            f"{path} outputs {dims[1].dim_value} logits per row, not one reward; it does not match {spec.name}"
        )
