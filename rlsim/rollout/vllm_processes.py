"""Where a ``vllm.LLM`` engine runs: in the processes vLLM spawns (its default) or in the caller's own.

``inline``: vLLM's engine core stays in this process (``InprocClient``; vLLM reads
``VLLM_ENABLE_V1_MULTIPROCESSING`` from the environment at engine start, ``vllm/envs.py``) and its model runner
too (the ``uni`` executor), so no two interpreters are spawned and started. Used by the rollout's generator
(``policy.engine_process``), the ``vllm`` scoring runtime and the ``genrm`` judge (``reward.engine_process``).
"""

from __future__ import annotations

import os
from typing import Any


def engine_process_args(inline: bool) -> dict[str, Any]:
    """Set the environment for the next engine start and return the ``LLM(...)`` arguments it needs."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if inline else "1"
    return {"distributed_executor_backend": "uni"} if inline else {}


def shutdown_engine(engine: Any) -> None:
    """Stop a ``vllm.LLM``'s engine (its core's processes, or the inline core); None or a half-built one is fine."""
    core = getattr(engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
