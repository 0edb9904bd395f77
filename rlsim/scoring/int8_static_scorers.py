"""Static int8 (QDQ) graphs calibrated on the fidelity calibration split: ``ort-int8-static`` and
``native-int8-static``.

``quantize_static`` runs the plain fp32 export over the calibration texts, records each activation's
range, and writes a QDQ graph with per-channel int8 weights and uint8 activations around
every MatMul (``QUANTIZED_OPS``). Unlike
``quantize_dynamic``, activation scales are fixed at build time, so no per-batch range search runs.
How the ranges are set and whether the graph is smoothed first are the settings ``int8_calibration`` and
``int8_smooth_alpha`` (``rlsim.scoring.int8_options``; default MinMax, no smoothing).
The calibration texts, their batching and the method are fixed, so the same model, seed and options give the
same graph bytes; the graph is cached next to the other exports (``<model key>-int8-static-v2-c64``, with
``-percentile`` / ``-entropy`` / ``-sq<alpha>`` appended for the options) with ``calibration.json`` and, for the
histogram methods, ``ranges.json`` (ORT's calibration cache: every quantized input's range and histogram).
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.paths import build_folder_once, cache_dir
from rlsim.scoring.base import RuntimeInfo, register_scorer
from rlsim.scoring.export import export_reward_model, quantizer_input
from rlsim.scoring.int8_options import Int8Options
from rlsim.scoring.int8_smoothing import CALIBRATION_BATCH, CALIBRATION_TEXTS, calibration_batches, smoothed_graph
from rlsim.scoring.native_scorer import NativeScorer
from rlsim.scoring.needs import NATIVE, ORT
from rlsim.scoring.ort_scorer import OrtScorer

STATIC_VERSION = "v2"
# Only MatMul inputs are quantized: quantizing every op (LayerNorm, Softmax, Gather, Add) with MinMax ranges
# clipped the activations so badly that Spearman with fp32 fell to 0.22 on the fidelity corpus; MatMul-only
# measured 0.90 on a 96-text slice (symmetric int8 activations: 0.73). Dynamic int8 still does better.
QUANTIZED_OPS = ("MatMul",)
# How each range method is set up, in the keyword names of ORT's create_calibrator (onnxruntime/quantization/
# calibrate.py). MinMax goes through quantize_static as it always did (the default graph keeps its bytes). The
# histogram methods are calibrated here, one batch per collect_data call (ORT's HistogramCollector stacks the
# batches of one call with np.asarray, which fails when batches are padded to different lengths; across calls it
# merges the histograms), and their ranges handed to quantize_static as a calibration cache. Percentile takes ORT
# 1.32's defaults (create_calibrator: 2048 bins, the 99.999th percentile, symmetric). Entropy does not: ORT's
# defaults, num_bins 128 = num_quantized_bins 128, leave its KL search (get_entropy_threshold) one candidate, the
# whole range, so "entropy" would be MinMax again (measured: the same graph bytes); 2048 bins searched down to 128
# is the setup of the talk calibrate.py cites for the method (Migacz, "8-bit inference with TensorRT", GTC 2017).
RANGE_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "minmax": ("MinMax", {"symmetric": False}),
    "percentile": ("Percentile", {"num_bins": 2048, "percentile": 99.999, "symmetric": True}),
    "entropy": ("Entropy", {"num_bins": 2048, "num_quantized_bins": 128, "symmetric": False}),
}


def static_int8_graph(
    spec: RewardModelSpec,
    count: int = CALIBRATION_TEXTS,
    out_dir: Path | None = None,
    options: Int8Options | None = None,
) -> Path:
    """The calibrated QDQ graph for ``spec`` built with ``options`` (default MinMax, no smoothing; built once,
    cached, process-safe)."""
    options = options or Int8Options()
    out = out_dir or cache_dir() / "onnx" / f"{spec.key}-int8-static-{STATIC_VERSION}-c{count}{options.static_suffix}"
    graph = out / "model.int8-static.onnx"
    build_folder_once(
        out,
        lambda d: (d / graph.name).is_file(),
        lambda tmp: quantize_with_calibration(spec, tmp / graph.name, count, options),
    )
    return graph


def quantize_with_calibration(spec: RewardModelSpec, out: Path, count: int, options: Int8Options) -> None:
    """``quantize_static`` of the plain graph (smoothed first if ``options`` say so) into ``out`` over ``count``
    calibration texts; writes ``calibration.json`` (the method, its values, and what was smoothed)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    method, calibrator_options = RANGE_METHODS[options.calibration]
    smoothing: dict[str, Any] | None = None
    plain = export_reward_model(spec).plain
    if options.smooth_alpha is not None:
        plain, smoothing = smoothed_graph(spec, options.smooth_alpha, count)
    batches = calibration_batches(spec, count)
    ranges = out.parent / "ranges.json"
    try:
        if method != "MinMax":
            _histogram_ranges(plain, batches, method, calibrator_options, ranges)
        with quantizer_input(plain) as source:
            quantize_static(
                str(source),
                str(out),
                _Reader(batches) if method == "MinMax" else None,
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                op_types_to_quantize=list(QUANTIZED_OPS),
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=CalibrationMethod[method],
                calibration_cache_path=None if method == "MinMax" else ranges,
                # The augmented model used for calibration goes to a temp folder ORT makes and removes.
            )
    except Exception as err:
        raise RlsimError(f"static int8 quantization of {plain} failed ({err}); use ort-int8 for this model") from err
    info = {
        "model": spec.name,
        "texts": sum(len(b["input_ids"]) for b in batches),
        "batch": CALIBRATION_BATCH,
        "method": method,
        "method_options": calibrator_options,
        "format": "QDQ",
        "ops": list(QUANTIZED_OPS),
        "smoothing": smoothing,
    }
    (out.parent / "calibration.json").write_text(json.dumps(info, indent=2))


def _histogram_ranges(
    plain: Path, batches: list[dict[str, np.ndarray]], method: str, options: dict[str, Any], out: Path
) -> None:
    """Each quantized op's input ranges by ``method`` (Percentile or Entropy) over ``batches``, one batch per call,
    saved at ``out`` as the calibration cache ``quantize_static`` reads (``save_tensors_data``)."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator, save_tensors_data

    with tempfile.TemporaryDirectory(prefix="rlsim-calibrate-") as tmp, quantizer_input(plain) as source:
        calibrator = create_calibrator(
            source,  # ORT's calibrator writes <name>-inferred.onnx beside its input too (quantizer_input)
            list(QUANTIZED_OPS),
            augmented_model_path=str(Path(tmp) / "augmented.onnx"),
            calibrate_method=CalibrationMethod[method],
            extra_options=options,
        )
        with contextlib.redirect_stdout(io.StringIO()):  # ORT prints its histogram settings per call
            for batch in batches:
                calibrator.collect_data(_Reader([batch]))
            save_tensors_data(calibrator.compute_data(), out)


class _Reader:
    """ORT CalibrationDataReader over the calibration batches: ``{"input_ids", "attention_mask"}`` each."""

    def __init__(self, batches: list[dict[str, np.ndarray]]) -> None:
        self._batches: Iterator[dict[str, np.ndarray]] = iter(batches)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)

    def rewind(self) -> None:  # part of ORT's reader interface; every range method makes one pass
        pass


# The ScorerSettings fields that change how this graph is built (rlsim.scoring.int8_options).
INT8_SETTINGS = ("int8_calibration", "int8_smooth_alpha")


@register_scorer(
    "ort-int8-static",
    RuntimeInfo(
        needs=ORT, precision="int8", quantized=True, calibrated=True, variant=True, int8_settings=INT8_SETTINGS
    ),
)
class OrtInt8StaticScorer(OrtScorer):
    name = "ort-int8-static"

    def graph_file(self, model: RewardModelSpec) -> Path:
        return static_int8_graph(model, options=self.settings.int8_options())


@register_scorer(
    "native-int8-static",
    RuntimeInfo(
        needs=NATIVE, precision="int8", quantized=True, calibrated=True, variant=True, int8_settings=INT8_SETTINGS
    ),
)
class NativeInt8StaticScorer(NativeScorer):
    name = "native-int8-static"

    def graph_file(self, model: RewardModelSpec) -> Path:
        return static_int8_graph(model, options=self.settings.int8_options())
