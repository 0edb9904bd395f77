"""The run configs the real-loop tests share: the tiny models on Ray, a few short rollouts a step.

``tiny_vllm_run``: generation on vLLM (its engine inside the rollout actor), actors spread over the two nodes
of the shared test cluster, real weight reloads. ``tiny_hf_run``: Hugging Face ``generate`` (no engine start)
and a free simulated weight sync, for tests whose subject is the reward side. Each returns a fresh copy with
whole top-level sections replaced (``reward={...}``, ``steps=4``, ...).
"""

from __future__ import annotations

import copy
from typing import Any

_PLACEMENT: dict[str, Any] = {
    "preset": "shared",
    "rollout": {"num_cpus": 0.25},
    "scorer": {"num_cpus": 0.25},
    "trainer": {"num_cpus": 0.25},
}

VLLM: dict[str, Any] = {
    "steps": 2,
    "micro_batch": 2,
    # inline: vLLM's engine in the rollout actor's process (two fewer interpreters to start per session); the
    # engine's own processes are exercised by the SIGTERM, engine-failure and vLLM-generator tests.
    "policy": {"model": "tiny-llama", "backend": "vllm", "temperature": 1.0, "engine_process": "inline"},
    "workload": {
        "prompts_per_step": 4,
        "group_size": 2,
        "spec": {
            "seed": 3,
            "prompt": {"kind": "fixed", "tokens": 8},
            "response": {"kind": "uniform", "min": 4, "max": 48},
        },
    },
    "reward": {"runtime": "eager", "replicas": 1, "batch_size": 4, "max_length": 128},
    "trainer": {"micro_batch": 4, "sync": "reload"},
    "placement": {**_PLACEMENT, "strategy": "SPREAD"},
}

HF: dict[str, Any] = {
    "steps": 2,
    "micro_batch": 2,
    "schedule": "overlapped",
    "policy": {"model": "tiny-llama", "backend": "hf"},
    "workload": {
        "prompts_per_step": 2,
        "group_size": 2,
        "spec": {
            "seed": 1,
            "prompt": {"kind": "fixed", "tokens": 8},
            "response": {"kind": "uniform", "min": 4, "max": 16},
        },
    },
    "reward": {"runtime": "eager", "batch_size": 4, "max_length": 64},
    "trainer": {"micro_batch": 4, "sync": "simulated", "simulated_sync_s": 0},
    "placement": {**_PLACEMENT, "strategy": "PACK"},
}


def tiny_vllm_run(**sections: Any) -> dict[str, Any]:
    """A copy of ``VLLM`` with whole top-level sections replaced."""
    return {**copy.deepcopy(VLLM), **copy.deepcopy(sections)}


def tiny_hf_run(**sections: Any) -> dict[str, Any]:
    """A copy of ``HF`` with whole top-level sections replaced."""
    return {**copy.deepcopy(HF), **copy.deepcopy(sections)}
