"""The run config the real-loop tests share: the tiny models on vLLM + Ray, a few short rollouts a step."""

from __future__ import annotations

import copy
from typing import Any

BASE: dict[str, Any] = {
    "steps": 2,
    "micro_batch": 2,
    "policy": {"model": "tiny-llama", "backend": "vllm", "temperature": 1.0},
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
    "placement": {
        "preset": "shared",
        "strategy": "SPREAD",
        "rollout": {"num_cpus": 0.25},
        "scorer": {"num_cpus": 0.25},
        "trainer": {"num_cpus": 0.25},
    },
}


def tiny_vllm_run(**sections: Any) -> dict[str, Any]:
    """A copy of ``BASE`` with whole top-level sections replaced (``reward={...}``, ``steps=4``, ...)."""
    return {**copy.deepcopy(BASE), **copy.deepcopy(sections)}
