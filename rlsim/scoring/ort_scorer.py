"""ONNX Runtime from Python: ``ort`` (fused fp32 graph) and ``ort-int8`` (dynamic int8 weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlsim.errors import RlsimError
from rlsim.models.reward import RewardModelSpec
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer
from rlsim.scoring.export import check_graph_matches, export_reward_model
from rlsim.scoring.needs import ORT
from rlsim.scoring.tokenizing import EncodedBatch, TokenizingScorer


def ort_session(path: Path, settings: ScorerSettings):
    """An InferenceSession with rlsim's thread/spinning settings on the requested device."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = settings.resolved_threads()
    so.inter_op_num_threads = settings.inter_op_threads
    spin = "1" if settings.spinning else "0"
    so.add_session_config_entry("session.intra_op.allow_spinning", spin)
    so.add_session_config_entry("session.inter_op.allow_spinning", spin)
    providers = ["CPUExecutionProvider"]
    if settings.device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RlsimError(
                "device 'cuda' needs onnxruntime-gpu (CUDAExecutionProvider is not available); "
                "pip install onnxruntime-gpu, or use device: cpu"
            )
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(str(path), so, providers=providers)


@register_scorer("ort", RuntimeInfo(needs=ORT))
class OrtScorer(TokenizingScorer):
    name = "ort"
    graph = "optimized"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        super().__init__(model, settings)
        self.use_graph(self.graph_file(model))

    def use_graph(self, path: Path) -> None:
        """Score with the graph at ``path`` from now on (the tokenizer stays loaded)."""
        check_graph_matches(path, self.model)
        self.graph_path = path
        self._session = ort_session(path, self.settings)
        self._inputs = {i.name for i in self._session.get_inputs()}

    def graph_file(self, model: RewardModelSpec) -> Path:
        """The ONNX graph this runtime loads (a variant with its own graph overrides this)."""
        return Path(getattr(export_reward_model(model), self.graph))

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        feed = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(batch.input_ids)
        (logits,) = self._session.run(None, feed)
        return logits.reshape(len(batch.input_ids), -1)[:, 0]


@register_scorer("ort-int8", RuntimeInfo(needs=ORT, precision="int8", quantized=True))
class OrtInt8Scorer(OrtScorer):
    name = "ort-int8"
    graph = "int8"
