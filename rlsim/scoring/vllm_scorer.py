"""``vllm``: the reward model on vLLM's pooling runner, an engine inside the scoring process; ``vllm-bf16``: the
same engine in bfloat16 (CPUs with AVX512-BF16 or AMX, or CUDA), a precision variant judged by the fidelity rules.

This is the path the frameworks serve discriminative reward models on: verl's reward loop sends rollouts to a
vLLM (or SGLang) server's classify endpoint behind a router (verl ``docs/advance/reward_loop.rst``). Here the
engine runs in the scorer's own process, so it is pinned and threaded like every other runtime and compared
with them in one run; the ``http`` runtime with ``http_protocol: vllm-classify`` reaches the same engine as
a server.

rlsim tokenizes and truncates as for every runtime (the same rows eager scores), and vLLM takes the token
ids (``TokensPrompt``), so the two see identical inputs; vLLM batches them its own way, with no padding
(continuous batching: one ``classify`` call schedules the rows in as many engine steps as its token budget
needs). The reward is the one-label head's raw logit: vLLM's classify applies the head's activation (a
sigmoid for one label) unless ``use_activation`` is off (``vllm/pooling_params.py``), and rlsim's rewards
are logits everywhere.

A model vLLM has no implementation for is refused before the engine starts, naming its architecture; an
engine that fails anyway (a CPU attention backend without encoder support, say) says why in one line
(``rlsim.rollout.engine_errors``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.hardware.cpu import BF16_CPU_FLAGS
from rlsim.models.reward import RewardModelSpec
from rlsim.rollout.engine_errors import engine_failure, is_engine_failure
from rlsim.rollout.vllm_processes import engine_process_args, engine_start_failed, shutdown_engine
from rlsim.scoring.base import RuntimeInfo, ScorerSettings, register_scorer
from rlsim.scoring.needs import VLLM
from rlsim.scoring.tokenizing import EncodedBatch, TokenizingScorer
from rlsim.scoring.vllm_server import GPU_MEMORY_FRACTION, vllm_env


def model_architecture(spec: RewardModelSpec) -> str:
    """The architecture a reward model's ``config.json`` names (``LlamaForSequenceClassification``)."""
    try:
        archs = json.loads((spec.path / "config.json").read_text()).get("architectures") or []
    except (OSError, ValueError) as err:
        raise RlsimError(f"{spec.path}/config.json cannot be read ({err}); is {spec.path} a model folder?") from None
    if not archs:
        raise RlsimError(f"{spec.path}/config.json names no architecture; save the model with save_pretrained")
    return str(archs[0])


def vllm_can_serve(architecture: str, supported: set[str]) -> bool:
    """Whether vLLM has an implementation for a sequence-classification ``architecture``: its own class, or
    the causal LM it converts into a classifier (vLLM's ``--convert classify`` swaps ``ForSequenceClassification``
    for ``ForCausalLM``, ``vllm/model_executor/models/registry.py`` ``_normalize_arch``)."""
    if architecture in supported:
        return True
    suffix = "ForSequenceClassification"
    return architecture.endswith(suffix) and architecture[: -len(suffix)] + "ForCausalLM" in supported


def _supported_architectures() -> set[str]:
    from vllm import ModelRegistry

    return set(ModelRegistry.get_supported_archs())


def _engine_failure(err: BaseException, doing: str, model: RewardModelSpec) -> RlsimError:
    advice = "fix the folder, or score it with eager, ort or native to see whether the model itself runs"
    return engine_failure(err, doing, model.path, actor="scorer", advice=advice, folder="reward model folder")


@register_scorer("vllm", RuntimeInfo(needs=VLLM, explicit=True, pads=False))
class VllmPoolingScorer(TokenizingScorer):
    """A ``vllm.LLM(runner="pooling")`` engine in ``dtype`` (fp32 here), scoring token-id rows with the classify
    task."""

    name = "vllm"
    dtype = "float32"

    def __init__(self, model: RewardModelSpec, settings: ScorerSettings) -> None:
        architecture = model_architecture(model)
        if not vllm_can_serve(architecture, _supported_architectures()):
            raise RlsimError(
                f"runtime {self.name!r} cannot serve {model.name} ({model.path}): vLLM has no implementation of "
                f"{architecture}; score it with eager, ort or native"
            )
        super().__init__(model, settings)
        os.environ.update(vllm_env(settings))
        from vllm import LLM, PoolingParams

        args: dict[str, Any] = dict(
            model=str(model.path),
            runner="pooling",
            convert="classify",
            dtype=self.dtype,
            max_model_len=self.max_length,
            enforce_eager=True,
            seed=0,
        )
        if settings.device == "cuda":
            args["gpu_memory_utilization"] = GPU_MEMORY_FRACTION
        args.update(engine_process_args(settings.engine_inline))
        try:
            self._llm = LLM(**args)
        except Exception as err:
            engine_start_failed(settings.engine_inline)
            if is_engine_failure(err):
                raise _engine_failure(err, "starting", model) from None
            raise RlsimError(f"runtime {self.name!r} could not start an engine for {architecture}: {err}") from None
        self._params = PoolingParams(use_activation=False)

    def _forward(self, batch: EncodedBatch) -> np.ndarray:
        from vllm.inputs import TokensPrompt

        pairs = zip(batch.input_ids, batch.attention_mask, strict=True)
        prompts = [TokensPrompt(prompt_token_ids=ids[mask.astype(bool)].tolist()) for ids, mask in pairs]
        try:
            outputs = self._llm.classify(prompts, pooling_params=self._params, use_tqdm=False)
        except Exception as err:
            if is_engine_failure(err):
                raise _engine_failure(err, "scoring", self.model) from None
            raise
        return np.array([out.outputs.probs[0] for out in outputs], dtype=np.float32)

    def _run(self, batch: EncodedBatch) -> np.ndarray:
        rewards = super()._run(batch)
        self.stats.padded_tokens -= int(batch.input_ids.size) - batch.real_tokens  # vLLM computes no padding
        return rewards

    def close(self) -> None:
        if hasattr(self, "_llm"):
            shutdown_engine(self._llm.llm_engine)


# vLLM's CPU backend accepts bfloat16 on every x86 CPU (vllm 0.32 ``vllm/platforms/cpu.py``,
# ``CpuPlatform.supported_dtypes``), with or without AVX512-BF16: without it ``import_kernels`` loads the
# ``_C_AVX512``/``_C_AVX2`` kernels and torch emulates bf16, slower than fp32. So the CPU flags are rlsim's check
# (``RuntimeInfo.cpu_flags``). The pooling runner keeps the classifier head in fp32 unless the model's config says
# otherwise (``vllm/config/model.py`` ``_get_head_dtype``); the encoder runs in bf16.
VLLM_BF16 = RuntimeInfo(needs=VLLM, precision="bf16", cpu_flags=BF16_CPU_FLAGS, variant=True, explicit=True, pads=False)


@register_scorer("vllm-bf16", VLLM_BF16)
class VllmBf16Scorer(VllmPoolingScorer):
    """The same engine in bfloat16: unpadded scheduling and bf16 matrix products (AMX or AVX512-BF16 on CPU)."""

    name = "vllm-bf16"
    dtype = "bfloat16"
