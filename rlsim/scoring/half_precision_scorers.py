"""PyTorch in 16-bit floats: ``eager-bf16``, ``compile-bf16`` (CPUs with AVX512-BF16 or AMX, or CUDA) and
``eager-fp16`` (CUDA only).

The model's weights are cast once after loading; activations follow. Rewards come back as float32.
Hardware that lacks the format is refused before the model loads (``RuntimeInfo.hardware_reason``):
without native bf16 dot products torch emulates bf16 on CPU, slower than fp32.
"""

from __future__ import annotations

from rlsim.hardware.cpu import BF16_CPU_FLAGS
from rlsim.models.reward import RewardModelSpec
from rlsim.scoring.base import SCORERS, RuntimeInfo, ScorerSettings, register_scorer
from rlsim.scoring.needs import TORCH
from rlsim.scoring.torch_scorers import CompiledScorer, EagerScorer

BF16 = RuntimeInfo(needs=TORCH, precision="bf16", cpu_flags=BF16_CPU_FLAGS, variant=True)

# bf16 in ONNX Runtime (and so in the native engine, which runs the same library): its CPU provider registers no
# bf16 MatMul on x86 (onnxruntime 1.32 answers a bf16 MatMul graph NOT_IMPLEMENTED, checked on this project's
# AVX512-BF16 CPU by tests/scoring/test_precision_variants.py); its bf16 fast-math GEMM is arm64 only (session option
# ``mlas.enable_gemm_fastmath_arm64_bfloat16``). So they are refused by name, with the reason.
_ORT_BF16 = (
    "ONNX Runtime's CPU provider has no bf16 MatMul on x86 (its bf16 fast-math GEMM is arm64 only), so a bf16 graph "
    "would not run; use eager-bf16 or compile-bf16 for bf16, or ort-int8-mixed / native-int8-mixed for ORT's fastest "
    "order-keeping path"
)
for _name in ("ort-bf16", "native-bf16"):
    SCORERS.refuse(_name, _ORT_BF16)
FP16 = RuntimeInfo(needs=TORCH, precision="fp16", devices=("cuda",), variant=True)
_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def _cast(scorer: EagerScorer, precision: str) -> None:
    import torch

    scorer._model = scorer._model.to(getattr(torch, _DTYPES[precision]))


@register_scorer("eager-bf16", BF16)
class EagerBf16Scorer(EagerScorer):
    name = "eager-bf16"
    precision = "bf16"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        super().__init__(model, settings)
        _cast(self, self.precision)
        self._module = self._model


@register_scorer("eager-fp16", FP16)
class EagerFp16Scorer(EagerBf16Scorer):
    name = "eager-fp16"
    precision = "fp16"


@register_scorer("compile-bf16", BF16)
class CompiledBf16Scorer(CompiledScorer):
    name = "compile-bf16"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        import torch

        super().__init__(model, settings)
        _cast(self, "bf16")
        self._module = torch.compile(self._model)  # compile the bf16 module, not the fp32 one
