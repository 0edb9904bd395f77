"""The run configs the real-loop tests share: the tiny models on Ray, a few short rollouts a step.

``tiny_vllm_run``: generation on vLLM (its engine inside the rollout actor), actors spread over the two nodes
of the shared test cluster, real weight reloads; ``tiny_async_run``: that on the async schedule with partial
rollouts (the session whose engine the real-loop tests share, tests/loop/conftest.py). ``tiny_hf_run``: Hugging
Face ``generate`` (no engine start) and a free simulated weight sync, for tests whose subject is the reward side.
Each returns a fresh copy with whole top-level sections replaced (``reward={...}``, ``steps=4``, ...).
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


# The async loop test's rollouts a step. The weights land inside a generate call only when the call outlasts the
# update beside it. A generate call lasts as long as its longest response (192-256 tokens); an update costs in
# proportion to all its tokens, so 4 rollouts a step keep the update at about half the call. With 8 a step the two
# were even, and a quiet-hour CI run saw every load land between calls. max_staleness 1 gives updates 2 and 3 a
# call under way each (with 2 the engine finished the last batch during update 2, leaving one chance).
ASYNC_ROLLOUTS = 4


def tiny_async_run(**sections: Any) -> dict[str, Any]:
    """``tiny_vllm_run`` on the async schedule: 4 updates of ``ASYNC_ROLLOUTS`` rollouts of 192-256 tokens,
    max_staleness 1, partial rollouts; then whole top-level sections replaced."""
    config = tiny_vllm_run(
        steps=4,
        schedule="async",
        micro_batch=4,
        **{"async": {"max_staleness": 1, "is_cap": 2.0, "partial_rollouts": True}},
    )
    config["workload"].update(prompts_per_step=2, group_size=ASYNC_ROLLOUTS // 2)
    config["workload"]["spec"]["response"] = {"kind": "uniform", "min": 192, "max": 256}
    return {**config, **copy.deepcopy(sections)}
