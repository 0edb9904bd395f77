"""The native C++ engine (``rlsim._native``): ``native`` (fused fp32 graph) and ``native-int8``.

Same ONNX graphs and session settings as the ``ort`` runtimes, but ONNX Runtime is driven from
C++ through a thin pybind11 layer that releases the GIL around ``Run``: the difference between
``ort`` and ``native`` is the cost of ONNX Runtime's Python binding, and two Python threads can
score at once with one engine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer
from rlsim.scoring.export import check_graph_matches, export_reward_model
from rlsim.scoring.needs import NATIVE
from rlsim.scoring.ort_library import find_ort_library, load_native
from rlsim.scoring.tokenizing import EncodedBatch, TokenizingScorer


@register_scorer("native", RuntimeInfo(needs=NATIVE))
class NativeScorer(TokenizingScorer):
    name = "native"
    graph = "optimized"  # attribute of ExportedModel holding the graph to load

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        super().__init__(model, settings)
        # Cheap checks first: an unbuilt engine or a missing library fails before any export.
        native = load_native()
        library = find_ort_library(settings.ort_path)
        self.graph_path = self.graph_file(model)
        check_graph_matches(self.graph_path, model)
        try:
            self._engine = native.Engine(
                str(self.graph_path),
                str(library),
                intra_op_threads=settings.resolved_threads(),
                inter_op_threads=settings.inter_op_threads,
                spinning=settings.spinning,
                optimization="all",
                device=settings.device,
            )
        except (ValueError, RuntimeError, OSError) as err:
            raise RlsimError(f"the native engine could not load {self.graph_path}: {err}") from err

    def graph_file(self, model: RewardModelSpec) -> Path:
        """The ONNX graph the engine loads (a variant with its own graph overrides this)."""
        return Path(getattr(export_reward_model(model), self.graph))

    @property
    def ort_version(self) -> str:
        """Version of the ONNX Runtime library the engine loaded, e.g. ``"1.32.0"``."""
        return str(self._engine.ort_version)

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        """One Run on int64 ``(batch, seq)`` ids and mask; float32 rewards ``(batch,)``."""
        return self._engine.run(batch.input_ids, batch.attention_mask)

    def close(self) -> None:
        # Dropping the engine frees its session and thread pool now rather than at collection.
        self._engine = None


@register_scorer("native-int8", RuntimeInfo(needs=NATIVE, precision="int8", quantized=True))
class NativeInt8Scorer(NativeScorer):
    name = "native-int8"
    graph = "int8"
