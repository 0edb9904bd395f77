"""SIGTERM to a driver that started Ray unwinds: exit 143 and none of Ray's processes left behind.

Ray's own driver handler aborts at once (exit 134) and leaves its dashboard and runtime-env agents
running; rlsim.signals.unwind_on_sigterm, installed by connect_ray, replaces it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import time
from rlsim.actors.ray_session import connect_ray
import ray
started = connect_ray()
try:
    print("ready", flush=True)
    time.sleep(120)
finally:
    if started:
        ray.shutdown()
        print("ray stopped", flush=True)
"""


def test_sigterm_stops_the_driver_and_every_ray_process() -> None:
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr.read()
        ray_pids = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        assert ray_pids  # raylet, gcs, the agents ...
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        assert "ray stopped" in proc.stdout.read()  # the finally block ran
    finally:
        if proc.poll() is None:
            proc.kill()
        for pipe in (proc.stdout, proc.stderr):  # an unclosed pipe is a ResourceWarning (an error under pytest)
            if pipe is not None:
                pipe.close()
    deadline = time.time() + 30
    while time.time() < deadline and any(psutil.pid_exists(p) for p in ray_pids):
        time.sleep(0.5)
    left = [p for p in ray_pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(psutil.Process(p).cmdline())[:80] for p in left]
