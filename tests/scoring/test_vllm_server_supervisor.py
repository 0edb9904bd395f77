"""The supervisor the ``http`` runtime puts around vLLM's own server (``rlsim.scoring.vllm_server``), with a
stand-in server that has a child of its own: SIGTERM stops the whole family, and so does its parent's death.
The real vLLM server under it runs in tests/scoring/test_vllm_serve_classify.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.vllm_server import server_args, vllm_env

SUPERVISE = [sys.executable, "-m", "rlsim.scoring.vllm_server", "--stop-s", "5", "--module"]


def _family(pids_file: Path, timeout_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while not (pids_file.is_file() and pids_file.read_text().strip()):
        assert time.monotonic() < deadline, "the stand-in server never started"
        time.sleep(0.05)
    return [int(p) for p in pids_file.read_text().split()]


def _all_gone(pids: list[int], timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_sigterm_stops_the_server_and_its_child(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    me = str(psutil.Process().pid)
    sup = subprocess.Popen([*SUPERVISE, "tests.helpers.process_family", "--parent-pid", me, "--", str(pids_file)])
    family = _family(pids_file)
    socket = Path((tmp_path / "pids.ipc").read_text())
    assert socket.is_file() and socket.parent.name.startswith(f"rlsim-vllm-{sup.pid}-")
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(30) == 0
    assert _all_gone(family)
    assert not socket.parent.exists()  # the server's socket folder went with the supervisor


def test_the_server_stops_when_the_process_that_started_it_dies(tmp_path: Path) -> None:
    """A parent killed with SIGKILL cannot stop anything: the supervisor sees it gone and stops the family."""
    pids_file = tmp_path / "pids"
    parent_code = (
        "import os, subprocess, sys, time\n"
        f"cmd = {SUPERVISE!r} + ['tests.helpers.process_family', '--parent-pid', str(os.getpid()), '--', "
        f"{str(pids_file)!r}]\n"
        "sup = subprocess.Popen(cmd)\n"
        f"open({str(tmp_path / 'sup')!r}, 'w').write(str(sup.pid))\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    family = _family(pids_file)
    sup_pid = int((tmp_path / "sup").read_text())
    parent.kill()
    parent.wait()
    assert _all_gone([sup_pid, *family])
    assert not Path((tmp_path / "pids.ipc").read_text()).parent.exists()


def test_server_arguments_and_environment_follow_the_settings(tmp_path: Path) -> None:
    cpu = server_args(tmp_path, "rm", 8123, ScorerSettings(max_length=128, threads=1))
    assert cpu[cpu.index("--port") + 1] == "8123" and cpu[cpu.index("--max-model-len") + 1] == "128"
    assert "--enforce-eager" in cpu and cpu[cpu.index("--dtype") + 1] == "float32"
    gpu = server_args(tmp_path, "rm", 8123, ScorerSettings(device="cuda"))
    assert "--gpu-memory-utilization" in gpu and "--max-model-len" not in gpu
    env = vllm_env(ScorerSettings(threads=1))
    assert len(env["VLLM_CPU_OMP_THREADS_BIND"].split(",")) == 1 and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in vllm_env(ScorerSettings(device="cuda"))
