"""SIGTERM to a driver that started Ray unwinds: exit 143 and none of Ray's processes left behind; the same
for ``rlsim run`` in the middle of an async run (actors, vLLM's engine process and Ray all stop).

Ray's own driver handler aborts at once (exit 134) and leaves its dashboard and runtime-env agents
running; rlsim.signals.unwind_on_sigterm, installed by connect_ray, replaces it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
from tests.helpers.tiny_run import tiny_vllm_run  # noqa: E402  (the real-loop tests' shared run config)

# The driver blocks in ray.get (where Ray turns the handler's SystemExit(143) into SystemExit(1)) or in
# plain Python; either way it exits 143 the way rlsim's CLI does, through rlsim.signals.terminated().
DRIVER = """
import sys, time
from rlsim import signals
from rlsim.actors.ray_session import connect_ray
import ray
started = connect_ray()

@ray.remote(num_cpus=0)
def wait() -> None:
    time.sleep(120)

try:
    print("ready", flush=True)
    ray.get(wait.remote()) if sys.argv[1] == "ray.get" else time.sleep(120)
except SystemExit:
    sys.exit(143 if signals.terminated() else 1)
finally:
    if started:
        ray.shutdown()
        print("ray stopped", flush=True)
"""


@pytest.mark.parametrize("blocked_in", ["ray.get", "time.sleep"])
def test_sigterm_stops_the_driver_and_every_ray_process(blocked_in: str) -> None:
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, blocked_in], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
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
    assert_all_gone(psutil, ray_pids)


def assert_all_gone(psutil, pids: list[int], wait_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Every process of ``pids`` ends (or is a zombie) within ``wait_s``; else fail naming those left."""
    deadline = time.time() + wait_s
    while time.time() < deadline and any(psutil.pid_exists(p) for p in pids):
        time.sleep(0.5)
    left = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(psutil.Process(p).cmdline())[:80] for p in left]


def test_sigterm_during_an_async_run_stops_every_actor_and_ray(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("ray")
    pytest.importorskip("vllm")
    config = tmp_path / "async.yaml"  # many steps: the run is still going when the signal comes
    # vLLM's own engine processes (engine_process: separate), which the signal must stop too.
    run = tiny_vllm_run(steps=40, schedule="async", **{"async": {"max_staleness": 1}})
    run["policy"]["engine_process"] = "separate"
    config.write_text(yaml.safe_dump(run))
    out, log = tmp_path / "out", tmp_path / "stderr.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "rlsim", "run", str(config), "--out", str(out), "--no-progress"]
    with log.open("w") as err:  # a file, not a pipe: vLLM's start-up lines would fill a pipe nobody reads
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp_path)
    try:
        deadline = time.time() + 900  # Ray, the actors and vLLM's engine start first (minutes on a loaded machine)
        while time.time() < deadline and proc.poll() is None and not _steps_done(out):
            time.sleep(1.0)
        assert proc.poll() is None and _steps_done(out) >= 1, log.read_text()[-3000:]
        pids = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        names = " ".join(" ".join(psutil.Process(p).cmdline()) for p in pids if psutil.pid_exists(p))
        assert "raylet" in names and "ray::" in names  # Ray and the actors are children of this run
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=180) == 128 + signal.SIGTERM, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "terminated (SIGTERM)" in log.read_text()
    assert_all_gone(psutil, pids, wait_s=60.0)
    saved = json.loads((out / "results.json").read_text())  # still whole: written atomically after each step
    assert saved["complete"] is False and saved["steps"][0]["policy_version"] == 1


def _steps_done(out: Path) -> int:
    try:
        return len(json.loads((out / "results.json").read_text())["steps"])
    except (OSError, ValueError, KeyError):
        return 0
