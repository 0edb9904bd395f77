"""vLLM's socket folders: one per process, removed at its exit, and those of dead processes removed by the next."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from rlsim.paths import remove_dead_folders
from rlsim.rollout.vllm_processes import IPC_PREFIX

MAKE_FOLDER = (
    "import os\n"
    "from rlsim.rollout.vllm_processes import engine_process_args, ipc_folder\n"
    "engine_process_args(True)\n"
    "assert os.environ['VLLM_RPC_BASE_PATH'] == str(ipc_folder())\n"
    "(ipc_folder() / 'socket').touch()\n"
    "print(ipc_folder())\n"
)


def test_a_process_removes_its_socket_folder_at_exit(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", MAKE_FOLDER], capture_output=True, text=True, env=env, check=True)
    folder = Path(out.stdout.strip())
    assert folder.parent == tmp_path and folder.name.startswith(IPC_PREFIX)
    assert not folder.exists()


def test_dead_processes_folders_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{IPC_PREFIX}{gone.stdout.strip()}-abc"
    alive = tmp_path / f"{IPC_PREFIX}{os.getpid()}-abc"
    other = tmp_path / f"{IPC_PREFIX}notapid-abc"
    for folder in (dead, alive, other):
        folder.mkdir()
        (folder / "socket").touch()
    assert remove_dead_folders(IPC_PREFIX, tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and other.exists()


class InprocClient:  # named as vLLM's in-process engine core client
    def shutdown(self) -> None:
        pass


def test_torch_set_num_threads_comes_back_when_the_last_inline_engine_stops(monkeypatch) -> None:
    import torch

    from rlsim.rollout import vllm_processes

    original = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", original)  # put back whatever happens below
    monkeypatch.setattr(vllm_processes, "_inline_engines", [0])
    monkeypatch.setattr(vllm_processes, "_torch_set_num_threads", [])
    engines = [SimpleNamespace(engine_core=InprocClient()) for _ in range(2)]
    for _ in engines:
        assert vllm_processes.engine_process_args(True) == {"distributed_executor_backend": "uni"}
        torch.set_num_threads = lambda n: None  # what vLLM's CPU worker does at each inline start
    vllm_processes.shutdown_engine(SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: None)))  # spawned
    vllm_processes.shutdown_engine(engines[0])
    assert torch.set_num_threads is not original  # the other engine still runs with its threads bound
    vllm_processes.shutdown_engine(engines[1])
    assert torch.set_num_threads is original


def test_an_inline_engine_that_failed_to_start_is_not_counted(monkeypatch) -> None:
    import torch

    from rlsim.rollout import vllm_processes

    original = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", original)
    monkeypatch.setattr(vllm_processes, "_inline_engines", [0])
    monkeypatch.setattr(vllm_processes, "_torch_set_num_threads", [])
    vllm_processes.engine_process_args(True)  # this one starts ...
    torch.set_num_threads = lambda n: None
    vllm_processes.engine_process_args(True)  # ... this one raises in LLM(...)
    vllm_processes.engine_start_failed(True)
    vllm_processes.engine_start_failed(False)  # a spawned engine counted nothing
    assert torch.set_num_threads is not original
    vllm_processes.shutdown_engine(SimpleNamespace(engine_core=InprocClient()))
    assert torch.set_num_threads is original and vllm_processes._inline_engines == [0]


def test_a_forked_child_leaves_its_parents_folder(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "from rlsim.rollout.vllm_processes import ipc_folder\n"
        "folder = ipc_folder()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)  # runs the atexit handlers it inherited\n"
        "os.waitpid(pid, 0)\n"
        "print(folder.is_dir(), folder)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    alive, folder = out.stdout.split()
    assert alive == "True" and not Path(folder).exists()  # kept while the parent ran, removed at its exit
