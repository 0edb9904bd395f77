"""Mixed int8/fp32 graphs that keep the reward order: ``ort-int8-mixed`` and ``native-int8-mixed``.

``ort-int8`` quantizes every weight MatMul (dynamic int8) and flips ~9% of within-group pairs on the fidelity
corpus. Here the layers that cost the order are left in fp32: ``rlsim.scoring.int8_sensitivity.choose_mixed`` ranks
the layers by harm on the fidelity corpus's calibration split and keeps the fewest of the most harmful in fp32
with which the rest in int8 passes the fidelity rules (pair flips <= 2%, Spearman >= 0.99) on that split. The
corpus that judges the runtime afterwards (``rlsim verify --fidelity``) never took part in the choice.

With the setting ``int8_smooth_alpha`` the plain graph is smoothed first (SmoothQuant, ``rlsim.scoring.
int8_smoothing``, on the calibration split) and the layers are ranked and chosen on the smoothed graph.

The graph is built once per model and cached next to the other exports (``<model key>-int8-mixed-v1``, with
``-sq<alpha>`` when smoothed) with ``choice.json``: the layers kept in fp32 and in int8, the calibration figures
and what was smoothed. The choice is scored with
fixed settings (one thread, the model's own truncation), so the same model gives the same graph here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlsim.corpus.agreement import FidelityRules
from rlsim.models.reward import RewardModelSpec
from rlsim.paths import build_folder_once, cache_dir
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer
from rlsim.scoring.int8_options import Int8Options
from rlsim.scoring.int8_sensitivity import choose_mixed
from rlsim.scoring.int8_smoothing import smoothed_graph
from rlsim.scoring.native_scorer import NativeScorer
from rlsim.scoring.needs import NATIVE, ORT
from rlsim.scoring.ort_scorer import OrtScorer

MIXED_VERSION = "v1"
GRAPH = "model.int8-mixed.onnx"
CHOICE = "choice.json"


def mixed_int8_folder(spec: RewardModelSpec, options: Int8Options | None = None) -> Path:
    suffix = (options or Int8Options()).smoothing_suffix  # the range method does not apply: ranges are per batch
    return cache_dir() / "onnx" / f"{spec.key}-int8-mixed-{MIXED_VERSION}{suffix}"


def mixed_int8_graph(spec: RewardModelSpec, out_dir: Path | None = None, options: Int8Options | None = None) -> Path:
    """The mixed graph for ``spec`` (smoothed first if ``options`` say so; chosen and built once, cached,
    process-safe)."""
    out = out_dir or mixed_int8_folder(spec, options)
    alpha = (options or Int8Options()).smooth_alpha
    build_folder_once(
        out, lambda d: (d / GRAPH).is_file() and (d / CHOICE).is_file(), lambda tmp: _choose(spec, tmp, alpha)
    )
    return out / GRAPH


def _choose(spec: RewardModelSpec, folder: Path, alpha: float | None) -> None:
    settings = ScorerSettings(threads=1, max_length=spec.max_length)
    rules = FidelityRules()
    plain, smoothing = smoothed_graph(spec, alpha) if alpha is not None else (None, None)
    report, choice = choose_mixed(
        spec, settings, folder / GRAPH, rules.max_pair_flip_rate, rules.min_spearman, plain=plain
    )
    info = {"model": spec.name, "rules": rules.as_dict(), "calibration": report["corpus"], **choice.as_dict(),
            "sensitivity": report["units"]}  # fmt: skip
    if smoothing is not None:  # unsmoothed choices keep the keys they had
        info["smoothing"] = smoothing
    (folder / CHOICE).write_text(json.dumps(info, indent=2))


def mixed_int8_choice(spec: RewardModelSpec, options: Int8Options | None = None) -> dict[str, Any]:
    """``choice.json`` of the model's mixed graph (built first if needed)."""
    return json.loads((mixed_int8_graph(spec, options=options).parent / CHOICE).read_text())


# The ScorerSettings fields that change how this graph is built (rlsim.scoring.int8_options).
INT8_SETTINGS = ("int8_smooth_alpha",)


@register_scorer(
    "ort-int8-mixed",
    RuntimeInfo(needs=ORT, precision="int8", quantized=True, variant=True, int8_settings=INT8_SETTINGS),
)
class OrtInt8MixedScorer(OrtScorer):
    name = "ort-int8-mixed"

    def graph_file(self, model: RewardModelSpec) -> Path:
        return mixed_int8_graph(model, options=self.settings.int8_options())


@register_scorer(
    "native-int8-mixed",
    RuntimeInfo(needs=NATIVE, precision="int8", quantized=True, variant=True, int8_settings=INT8_SETTINGS),
)
class NativeInt8MixedScorer(NativeScorer):
    name = "native-int8-mixed"

    def graph_file(self, model: RewardModelSpec) -> Path:
        return mixed_int8_graph(model, options=self.settings.int8_options())
