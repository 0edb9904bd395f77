"""Run one program in a sandbox: fresh namespaces, a read-only filesystem but for its own temporary folder,
no network, limits on wall clock, CPU seconds, memory, processes and file size; the folder is removed after.

``run_program(source, limits)`` writes ``source`` to ``prog.py`` in a new temporary folder and runs it with this
interpreter under ``rlsim/rewards/sandbox_init.py`` (the in-namespace set-up, see there), inside
``unshare --user --map-root-user --mount --net --pid --fork --kill-child --mount-proc`` (util-linux). The host
kills the sandbox at ``wall_s``; killing its first process ends every process inside (a fork bomb included).
Code-execution rewards in the frameworks run the same way, one fresh sandbox per program (ROLL
``roll/pipeline/rlvr/rewards/code_sandbox_reward_worker.py``; verl's sandbox-fusion client
``verl/utils/reward_score/sandbox_fusion/utils.py``), with limits per call.

``isolate=False`` runs the same program with none of this (for measuring what the isolation costs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rlsim.errors import RlsimError

INIT = Path(__file__).with_name("sandbox_init.py")
UNSHARE = ("--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc")
SETUP_FAILED = 125  # sandbox_init.py's exit code when the sandbox itself could not be set up
PIDS_CGROUPS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))  # cgroup v1's pids hierarchy, or v2's root
OUTPUT_TAIL = 2000  # characters of the program's stderr kept for the result


@dataclass(frozen=True)
class SandboxLimits:
    """``wall_s``: seconds before the host kills it; ``cpu_s``: CPU seconds (RLIMIT_CPU, rounded up);
    ``memory_mb``: address space per process; ``max_processes``: processes and threads inside;
    ``max_file_mb``: the largest file it may write; ``isolate``: False runs with no namespace and no limit."""

    wall_s: float = 5.0
    cpu_s: float = 4.0
    memory_mb: int = 1024
    max_processes: int = 32
    max_file_mb: int = 16
    isolate: bool = True


@dataclass(frozen=True)
class ProgramResult:
    """``passed``: exit code 0; ``timed_out``: killed at the wall clock; ``exit_code``: negative for a signal."""

    passed: bool
    timed_out: bool
    exit_code: int | None
    seconds: float
    stderr_tail: str = ""
    stdout_tail: str = ""


def run_program(source: str, limits: SandboxLimits) -> ProgramResult:
    """Run ``source`` (Python) in a fresh sandbox; its folder is gone when this returns."""
    if limits.isolate:
        check_namespaces()
    workdir = Path(tempfile.mkdtemp(prefix="rlsim-sandbox-"))
    try:
        (workdir / "prog.py").write_text(source)
        spec = {"workdir": str(workdir), "isolate": limits.isolate, "cpu_s": limits.cpu_s,
                "memory_mb": limits.memory_mb, "max_processes": limits.max_processes,
                "max_file_mb": limits.max_file_mb, "argv": [sys.executable, "-I", "prog.py"]}  # fmt: skip
        command = [sys.executable, "-I", "-S", str(INIT)]
        if not limits.isolate:
            return _run([*command, json.dumps(spec)], workdir, limits.wall_s)
        with process_limit(limits.max_processes) as cgroup:
            spec["cgroup"] = cgroup
            return _run(["unshare", *UNSHARE, "--", *command, json.dumps(spec)], workdir, limits.wall_s)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def process_limit(max_processes: int) -> Iterator[str | None]:
    """A pids cgroup holding at most ``max_processes`` tasks for one sandbox (its path), or None where the
    kernel's RLIMIT_NPROC does the job. Root is exempt from RLIMIT_NPROC even inside a user namespace (the kernel
    skips the check for uid 0), so as root the limit is a cgroup; the sandbox joins it before the program runs."""
    if os.geteuid() != 0:
        yield None
        return
    parent = next((p for p in PIDS_CGROUPS if (p / "pids.max").exists() or (p / "cgroup.procs").exists()), None)
    if parent is None or not os.access(parent, os.W_OK):
        raise RlsimError(
            "the sandbox runs as root here, where only a pids cgroup can bound its processes, and no writable "
            f"one exists ({' or '.join(map(str, PIDS_CGROUPS))}); run rlsim as a non-root user, "
            "or set reward.sandbox.isolate: false to run programs unconfined (not for untrusted code)"
        )
    group = Path(tempfile.mkdtemp(prefix="rlsim-sandbox-", dir=parent))
    try:
        (group / "pids.max").write_text(str(max_processes))
        yield str(group)
    finally:
        for _ in range(100):  # the killed tasks leave within milliseconds; the folder goes once they have
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.01)


def _run(command: list[str], workdir: Path, wall_s: float) -> ProgramResult:
    t0 = time.monotonic()
    with open(workdir / ".stdout", "wb") as out, open(workdir / ".stderr", "wb") as err:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=wall_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()  # unshare's child (the namespace's PID 1) dies with it: --kill-child
            proc.wait()
            code, timed_out = None, True
    seconds = time.monotonic() - t0
    tail = (workdir / ".stderr").read_bytes()[-OUTPUT_TAIL:].decode(errors="replace")
    out_tail = (workdir / ".stdout").read_bytes()[-OUTPUT_TAIL:].decode(errors="replace")
    if code == SETUP_FAILED and "rlsim sandbox:" in tail:
        raise RlsimError(f"the sandbox could not be set up: {tail.strip().splitlines()[-1]}")
    return ProgramResult(code == 0, timed_out, code, seconds, tail, out_tail)


@lru_cache(maxsize=1)
def check_namespaces() -> None:
    """Raise naming the fix when this machine cannot make the sandbox's namespaces (checked once)."""
    if shutil.which("unshare") is None:
        raise RlsimError(
            "the sandbox needs util-linux's unshare, which is not on PATH; install util-linux, "
            "or set reward.sandbox.isolate: false to run programs unconfined (not for untrusted code)"
        )
    probe = subprocess.run(["unshare", *UNSHARE, "--", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        raise RlsimError(
            f"this machine refuses the sandbox's namespaces (unshare {' '.join(UNSHARE)}: "
            f"{probe.stderr.strip() or probe.returncode}); allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0), "
            "or set reward.sandbox.isolate: false to run programs unconfined (not for untrusted code)"
        )
