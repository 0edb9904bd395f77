"""Published NeMo-RL GRPO runs: the four the GPU model is calibrated on (issue 26) and those it is checked on.

Each row is a run as its recipe configured it (``examples/configs/recipes/llm/performance/*.yaml`` and
``examples/configs/grpo_math_*.yaml`` of NVIDIA-NeMo/RL at the release named) with the step time the
publication reports. ``CALIBRATION`` is exactly the set issue 26 declares (the v0.3 blog's two rows with
their phases, the v0.4 performance summary's two Llama-3.1-8B rows); every other row is ``VALIDATION`` and
is never fitted on.

Publications give the mean sequence length ("G-Average Seq len", taken here as prompt plus response) or, for the blog,
the mean generated length. The prompt length (200 tokens: an OpenMathInstruct-2 problem in the chat
template with NeMo-RL's math prompt) and the lognormal spread of responses (sigma 0.8) are assumptions,
the same for every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlsim.planner.spec.gpu_run import GpuRunConfig

PROMPT_TOKENS = 200  # assumed, see the module docstring
BLOG_V03 = "https://nvidia-nemo.github.io/blog/2025/07/21/nemo-rl-v0.3 (as quoted in issue 26)"
SUMMARY = "NVIDIA-NeMo/RL docs/about/performance-summary.md"


@dataclass(frozen=True)
class PublishedRun:
    """One published step time (seconds) and, where given, its phases in NeMo-RL's names."""

    id: str
    source: str
    config: GpuRunConfig
    step_s: float
    phases: dict[str, float] = field(default_factory=dict)


def _run(
    name: str,
    *,
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    gpus: int,
    seq: float | None = None,
    response: float | None = None,
    gpn: int = 8,
    gen: dict[str, Any] | None = None,
    train: dict[str, Any] | None = None,
    split: int | None = None,
    prompts: int = 64,
    max_seq: int = 4096,
) -> GpuRunConfig:
    response_mean = response if response is not None else (seq or 0) - PROMPT_TOKENS
    generation = dict(gen or {})
    placement, schedule = "colocated", "sync"
    if split is not None:  # NeMo-RL's async 1-off recipes: separate pools, vLLM at 0.8 of memory
        placement, schedule = "split", "async"
        generation.update(gpus=split, gpu_memory_utilization=0.8)
    data = {
        "kind": "gpu-step",
        "name": name,
        "model": model,
        "gpu": gpu,
        "gpus": gpus,
        "gpus_per_node": gpn,
        "rollouts": {
            "prompts_per_step": prompts,
            "group_size": 32,
            "prompt_tokens": PROMPT_TOKENS,
            "response_mean": response_mean,
            "max_sequence": max_seq,
        },
        "generation": generation,
        "training": train or {},
        "placement": placement,
        "schedule": schedule,
        "efficiency": "unused",
        "steps": 3,
        "seed": 0,
    }
    return GpuRunConfig.model_validate(data)


_MEG_V03 = {"backend": "megatron", "pp": 2, "logprob_batch_size": 4}  # grpo_math_8B_megatron.yaml @v0.3.0
_DT_V03 = {"backend": "dtensor", "logprob_batch_size": 2}  # grpo_math_8B.yaml @v0.3.0
_LLAMA_PERF = {"backend": "megatron", "pp": 2, "activation_checkpointing": True, "logprob_batch_size": 2}
_LLAMA_PP1 = {**_LLAMA_PERF, "pp": 1}
_FP8 = {**_LLAMA_PP1, "precision": "fp8"}
_QWEN_H100 = {"backend": "megatron", "tp": 4, "pp": 4}  # grpo-qwen3-32b-4n8g.yaml
_QWEN_GB200 = {"backend": "megatron", "tp": 2}  # grpo-qwen3-32b-4n4g.yaml
# Mixture-of-experts recipes @v0.5.0 (grpo-qwen3-30ba3b-*, grpo-qwen3-235b-*): Training [TP, CP, EP, PP] as the
# summary's table gives them; 235B: 16 prompts x 32, 8,192 tokens, micro and log-prob batch 1, recompute.
_A3B_H100 = {"backend": "megatron", "ep": 8}  # 4n8g
_A3B_H100_OFF = {**_A3B_H100, "pp": 2}  # 4n8g-async-1off
_A3B_GB200 = {"backend": "megatron", "ep": 16}  # 4n4g, 8n4g-async-1off
_235B = {"backend": "megatron", "logprob_batch_size": 1, "activation_checkpointing": True}
_235B_H100 = {**_235B, "tp": 2, "cp": 2, "ep": 16, "pp": 8}  # 16n8g
_235B_H100_OFF = {**_235B, "tp": 4, "ep": 16, "pp": 8}  # 32n8g-async-1off
_235B_GB200 = {**_235B, "tp": 2, "cp": 2, "ep": 16, "pp": 4}  # 16n4g
_235B_GB200_OFF = {**_235B, "tp": 4, "ep": 16, "pp": 4}  # 32n4g-async-1off
_235B_RUN: dict[str, Any] = {"model": "qwen3-235b-a22b", "prompts": 16, "max_seq": 8192}

CALIBRATION: list[PublishedRun] = [
    PublishedRun(
        "v0.3-blog-megatron-8xH100",
        f"{BLOG_V03}; examples/configs/grpo_math_8B_megatron.yaml @v0.3.0",
        _run("blog-megatron", gpus=8, response=795, train=_MEG_V03),
        112.0,
        {"generation": 58, "logprobs": 18, "training": 28, "refit": 5},
    ),
    PublishedRun(
        "v0.3-blog-dtensor-8xH100",
        f"{BLOG_V03}; examples/configs/grpo_math_8B.yaml @v0.3.0",
        _run("blog-dtensor", gpus=8, response=777, train=_DT_V03),
        122.0,
        {"generation": 57, "logprobs": 19, "training": 38, "refit": 4},
    ),
    PublishedRun(
        "v0.4-onpolicy-16xH100",
        f"{SUMMARY} @v0.4 (first table); grpo-llama3.1-8b-instruct-2n8g.yaml @v0.4.0",
        _run("v04-on", gpus=16, seq=1060, train=_LLAMA_PERF),
        97.7,
    ),
    PublishedRun(
        "v0.4-1off-8+8xH100",
        f"{SUMMARY} @v0.4; grpo-llama3.1-8b-instruct-2n8g-async-1off.yaml @v0.4.0",
        _run("v04-off", gpus=16, seq=1129, train=_LLAMA_PERF, split=8),
        74.6,
    ),
]

_V05 = f"{SUMMARY} @v0.5.0"
VALIDATION: list[PublishedRun] = [
    PublishedRun(
        "v0.5-llama8b-onpolicy-16xH100", f"{_V05}, H100 BF16", _run("a", gpus=16, seq=1019, train=_LLAMA_PERF), 92.8
    ),
    PublishedRun(
        "v0.5-llama8b-1off-8+8xH100",
        f"{_V05}, H100 BF16",
        _run("b", gpus=16, seq=1123, train=_LLAMA_PP1, split=8),
        64.8,
    ),
    PublishedRun(
        "v0.5-llama8b-fp8-1off-8+8xH100",
        f"{_V05}, H100 FP8",
        _run("c", gpus=16, seq=1128, train=_FP8, gen={"precision": "fp8"}, split=8),
        53.0,
    ),
    PublishedRun(
        "v0.5-llama8b-onpolicy-8xGB200",
        f"{_V05}, GB200 BF16",
        _run("d", gpu="gb200", gpus=8, gpn=4, seq=1066, train=_LLAMA_PP1),
        91.0,
    ),
    PublishedRun(
        "v0.5-llama8b-1off-4+4xGB200",
        f"{_V05}, GB200 BF16",
        _run("e", gpu="gb200", gpus=8, gpn=4, seq=1107, train=_LLAMA_PP1, split=4),
        71.1,
    ),
    PublishedRun(
        "v0.4-qwen3-32b-onpolicy-32xH100",
        f"{SUMMARY} @v0.4",
        _run("f", model="qwen3-32b", gpus=32, seq=3206, gen={"tp": 4}, train=_QWEN_H100),
        393.0,
    ),
    PublishedRun(
        "v0.4-qwen3-32b-1off-32+32xH100",
        f"{SUMMARY} @v0.4",
        _run("g", model="qwen3-32b", gpus=64, seq=3207, gen={"tp": 4}, train=_QWEN_H100, split=32),
        215.0,
    ),
    PublishedRun(
        "v0.5-qwen3-32b-onpolicy-32xH100",
        f"{_V05}, H100 BF16",
        _run("h", model="qwen3-32b", gpus=32, seq=3251, gen={"tp": 4}, train=_QWEN_H100),
        376.0,
    ),
    PublishedRun(
        "v0.5-qwen3-32b-1off-32+32xH100",
        f"{_V05}, H100 BF16",
        _run("i", model="qwen3-32b", gpus=64, seq=3252, gen={"tp": 4}, train=_QWEN_H100, split=32),
        200.0,
    ),
    PublishedRun(
        "v0.5-qwen3-32b-onpolicy-16xGB200",
        f"{_V05}, GB200 BF16",
        _run("j", model="qwen3-32b", gpu="gb200", gpus=16, gpn=4, seq=3253, train=_QWEN_GB200),
        381.0,
    ),
    PublishedRun(
        "v0.5-qwen3-32b-1off-16+16xGB200",
        f"{_V05}, GB200 BF16",
        _run("k", model="qwen3-32b", gpu="gb200", gpus=32, gpn=4, seq=3258, train=_QWEN_GB200, split=16),
        210.0,
    ),
    # Mixture of experts (added with MoE support; validation only, never fitted)
    PublishedRun(
        "v0.5-qwen3-30b-a3b-onpolicy-32xH100",
        f"{_V05}, H100 BF16",
        _run("l", model="qwen3-30b-a3b", gpus=32, seq=3196, gen={"tp": 2}, train=_A3B_H100),
        198.0,
    ),
    PublishedRun(
        "v0.5-qwen3-30b-a3b-1off-16+16xH100",
        f"{_V05}, H100 BF16",
        _run("m", model="qwen3-30b-a3b", gpus=32, seq=3201, gen={"tp": 2}, train=_A3B_H100_OFF, split=16),
        154.0,
    ),
    PublishedRun(
        "v0.5-qwen3-30b-a3b-onpolicy-16xGB200",
        f"{_V05}, GB200 BF16",
        _run("n", model="qwen3-30b-a3b", gpu="gb200", gpus=16, gpn=4, seq=3198, train=_A3B_GB200),
        232.0,
    ),
    PublishedRun(
        "v0.5-qwen3-30b-a3b-1off-16+16xGB200",
        f"{_V05}, GB200 BF16",
        _run("o", model="qwen3-30b-a3b", gpu="gb200", gpus=32, gpn=4, seq=3204, train=_A3B_GB200, split=16),
        136.0,
    ),
    PublishedRun(
        "v0.5-qwen3-235b-onpolicy-128xH100",
        f"{_V05}, H100 BF16",
        _run("p", gpus=128, seq=5700, gen={"tp": 16}, train=_235B_H100, **_235B_RUN),
        431.0,
    ),
    PublishedRun(
        "v0.5-qwen3-235b-1off-128+128xH100",
        f"{_V05}, H100 BF16",
        _run("q", gpus=256, seq=5707, gen={"tp": 8}, train=_235B_H100_OFF, split=128, **_235B_RUN),
        203.0,
    ),
    PublishedRun(
        "v0.5-qwen3-235b-onpolicy-64xGB200",
        f"{_V05}, GB200 BF16",
        _run("r", gpu="gb200", gpus=64, gpn=4, seq=5711, gen={"tp": 8}, train=_235B_GB200, **_235B_RUN),
        332.0,
    ),
    PublishedRun(
        "v0.5-qwen3-235b-1off-64+64xGB200",
        f"{_V05}, GB200 BF16",
        _run("s", gpu="gb200", gpus=128, gpn=4, seq=5711, gen={"tp": 8}, train=_235B_GB200_OFF, split=64, **_235B_RUN),
        268.0,
    ),
]

# Async/sync pairs of the same release, model and GPU (the ratio check): (async id, sync id).
ASYNC_PAIRS = [
    ("v0.5-llama8b-1off-8+8xH100", "v0.5-llama8b-onpolicy-16xH100"),
    ("v0.5-llama8b-1off-4+4xGB200", "v0.5-llama8b-onpolicy-8xGB200"),
    ("v0.4-qwen3-32b-1off-32+32xH100", "v0.4-qwen3-32b-onpolicy-32xH100"),
    ("v0.5-qwen3-32b-1off-32+32xH100", "v0.5-qwen3-32b-onpolicy-32xH100"),
    ("v0.5-qwen3-32b-1off-16+16xGB200", "v0.5-qwen3-32b-onpolicy-16xGB200"),
    ("v0.5-qwen3-30b-a3b-1off-16+16xH100", "v0.5-qwen3-30b-a3b-onpolicy-32xH100"),
    ("v0.5-qwen3-30b-a3b-1off-16+16xGB200", "v0.5-qwen3-30b-a3b-onpolicy-16xGB200"),
    ("v0.5-qwen3-235b-1off-128+128xH100", "v0.5-qwen3-235b-onpolicy-128xH100"),
    ("v0.5-qwen3-235b-1off-64+64xGB200", "v0.5-qwen3-235b-onpolicy-64xGB200"),
]
