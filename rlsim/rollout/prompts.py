"""A step's requests: prompts from the workload, each asked ``group_size`` times (a GRPO group),
every sample with its own response length drawn from the workload's distribution.

Steps are reproducible: step ``k`` draws from seeds derived from ``(workload.seed, k)``, so two runs
(or two processes) of the same config see the same prompts and lengths.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlsim.errors import RlsimError
from rlsim.rollout.types import RolloutRequest
from rlsim.workloads import FixedLengths, LengthDist, WorkloadSpec, build_workload, read_texts


def make_step_requests(spec: WorkloadSpec, step: int, num_prompts: int, group_size: int) -> list[RolloutRequest]:
    """``num_prompts`` prompts x ``group_size`` samples; uid = group * group_size + sample (groups adjacent)."""
    seed = int(np.random.SeedSequence([spec.seed, step]).generate_state(1)[0])
    lengths = spec.response.sample(np.random.default_rng(seed), num_prompts * group_size)
    prompts = _step_prompts(spec, step, num_prompts, seed)
    return [
        RolloutRequest(g * group_size + s, g, prompts[g], int(lengths[g * group_size + s]))
        for g in range(num_prompts)
        for s in range(group_size)
    ]


def _step_prompts(spec: WorkloadSpec, step: int, num_prompts: int, seed: int) -> list[str]:
    if spec.path is not None:
        # A file's texts are taken in order, wrapping around, so successive steps see new prompts.
        texts = read_texts(spec.path)
        start = (step * num_prompts) % len(texts)
        return [texts[(start + i) % len(texts)] for i in range(num_prompts)]
    return build_workload(spec.model_copy(update={"count": num_prompts, "seed": seed})).prompts


def max_prompt_tokens(spec: WorkloadSpec) -> int | None:
    """The longest prompt the spec can draw, in tokens (None for a file: known only after tokenizing)."""
    if spec.path is not None:
        return None
    return _longest(spec.prompt)


def max_response_tokens(spec: WorkloadSpec) -> int:
    """The longest response the spec can draw, in tokens."""
    return _longest(spec.response)


def _longest(dist: LengthDist) -> int:
    return int(dist.tokens if isinstance(dist, FixedLengths) else dist.max)


def encode_prompt(tokenizer: Any, request: RolloutRequest, max_model_len: int) -> list[int]:
    """Policy token ids of the prompt (no special tokens), checked to fit with the response in the context."""
    ids = list(tokenizer.encode(request.prompt, add_special_tokens=False))
    if not ids:
        raise RlsimError(f"prompt of sample {request.uid} is empty after tokenizing; remove empty prompts")
    if len(ids) + request.response_tokens > max_model_len:
        raise RlsimError(
            f"prompt ({len(ids)} tokens) + response ({request.response_tokens} tokens) exceeds the policy context "
            f"of {max_model_len} tokens; lower the workload's response lengths or raise policy.max_model_len"
        )
    return ids
