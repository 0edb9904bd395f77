"""Where a ``vllm.LLM`` engine runs: in the processes vLLM spawns (its default) or in the caller's own; and where
its ZMQ sockets live.

``inline``: vLLM's engine core stays in this process (``InprocClient``; vLLM reads
``VLLM_ENABLE_V1_MULTIPROCESSING`` from the environment at engine start, ``vllm/envs.py``) and its model runner
too (the ``uni`` executor), so no two interpreters are spawned and started. Used by the rollout's generator
(``policy.engine_process``), the ``vllm`` scoring runtime and the ``genrm`` judge (``reward.engine_process``).

An inline engine's CPU worker also replaces ``torch.set_num_threads`` with a no-op for the whole process, so
nothing unbinds its threads (``vllm/v1/worker/cpu_worker.py``, ``skip_set_num_threads``); once the last inline
engine of the process is shut down, the original is put back, so a process that goes on (a test, an actor that
scores next) can set its threads again.

Sockets: vLLM names each IPC socket ``ipc://$VLLM_RPC_BASE_PATH/<uuid4>`` (``vllm/utils/network_utils.py``
``get_open_zmq_ipc_path``; the default base is the temp folder) and leaves the socket file behind when it stops, so a
day of runs left thousands of empty socket files in /tmp. Each process that starts an engine (or the OpenAI
server, ``rlsim.scoring.vllm_server``) gets a folder of its own instead, ``rlsim-vllm-<pid>-*`` in the temp folder,
removed when the process exits; a process killed outright (an actor ``ray.kill`` ends) cannot remove its own, so
every new folder first removes those of processes that no longer exist.
"""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path
from typing import Any

from rlsim.paths import process_folder

IPC_PREFIX = "rlsim-vllm-"
_own_folder: list[Path] = []  # this process's, once made
_torch_set_num_threads: list[Any] = []  # torch's own, kept before the first inline engine replaces it
_inline_engines = [0]  # started in this process and not yet shut down


def engine_process_args(inline: bool) -> dict[str, Any]:
    """Set the environment for the next engine start and return the ``LLM(...)`` arguments it needs."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if inline else "1"
    os.environ["VLLM_RPC_BASE_PATH"] = str(ipc_folder())
    if not inline:
        return {}
    import torch

    if not _torch_set_num_threads:
        _torch_set_num_threads.append(torch.set_num_threads)
    _inline_engines[0] += 1
    return {"distributed_executor_backend": "uni"}


def ipc_folder() -> Path:
    """This process's folder for vLLM's sockets: made on first use (after removing dead processes' folders) and
    removed at exit."""
    if not _own_folder:
        folder = process_folder(IPC_PREFIX)
        atexit.register(_remove_own, folder, os.getpid())
        _own_folder.append(folder)
    return _own_folder[0]


def _remove_own(folder: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child that inherited the handler: the folder is its parent's
        shutil.rmtree(folder, ignore_errors=True)


def shutdown_engine(engine: Any) -> None:
    """Stop a ``vllm.LLM``'s engine (its core's processes, or the inline core); None or a half-built one is fine."""
    core = getattr(engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    if type(core).__name__ == "InprocClient":
        _release_inline()


def engine_start_failed(inline: bool) -> None:
    """The ``LLM(...)`` that ``engine_process_args(inline)`` prepared raised: an inline engine it counted never
    ran, so it is given back (else the process's threads would stay bound after its last real engine stops)."""
    if inline:
        _release_inline()


def _release_inline() -> None:
    if _inline_engines[0] > 0:
        _inline_engines[0] -= 1
        if _inline_engines[0] == 0 and _torch_set_num_threads:
            import torch

            torch.set_num_threads = _torch_set_num_threads[0]
