"""A stand-in server for supervisor tests: it starts a child (as vLLM's API server starts its EngineCore),
writes both pids to the file named by its first argument, and sleeps until it is killed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(sys.argv[1]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(600)
