"""A stand-in server for supervisor tests: it starts a child (as vLLM's API server starts its EngineCore),
writes both pids to the file named by its first argument, and sleeps until it is killed. Like vLLM it leaves a
socket file in ``$VLLM_RPC_BASE_PATH``, whose path it writes to ``<first argument>.ipc`` first."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    socket = Path(os.environ["VLLM_RPC_BASE_PATH"]) / "socket"
    socket.touch()
    Path(sys.argv[1] + ".ipc").write_text(str(socket))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(sys.argv[1]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(600)
