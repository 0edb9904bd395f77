"""Pinning actor processes to cores, and per-process CPU accounting (plain Python, no Ray).

Which cores each actor gets is decided in ``rlsim.placement``; this module makes it so.

Ray's ``num_cpus`` is bookkeeping only: two actors with ``num_cpus=1`` each still run on any core.
Real sharing or splitting of cores comes from pinning every thread of the actor process
(``os.sched_setaffinity``) and setting its compute-thread counts; child processes (vLLM's engine
core and worker) inherit the pinning.
"""

from __future__ import annotations

import os

import psutil

from rlsim.errors import RlsimError


def pin_process(cores: tuple[int, ...] | list[int]) -> list[int]:
    """Pin every thread of this process to ``cores``; threads and processes started later inherit it.

    ``os.sched_setaffinity(0, ...)`` alone would pin only the calling thread, leaving threads the
    process already runs (Ray's, for one) on every core. Returns the cores now in effect.
    """
    wanted = set(cores)
    if not wanted:
        raise RlsimError("cannot pin to an empty core list; fix placement.*.cores or placement.pool")
    for tid in _thread_ids():
        try:
            os.sched_setaffinity(tid, wanted)
        except (ProcessLookupError, PermissionError):  # thread exited meanwhile / not ours to pin
            continue
        except OSError:  # EINVAL: none of these cores exist on this node (or in its cpuset)
            raise RlsimError(
                f"cannot pin to cores {sorted(wanted)}: this node has {os.cpu_count()} cores "
                f"(this process may use {sorted(os.sched_getaffinity(0))}); fix placement.*.cores or placement.pool"
            ) from None
    actual = sorted(os.sched_getaffinity(0))
    if set(actual) != wanted:  # the kernel silently drops cores that do not exist
        raise RlsimError(
            f"asked to pin to cores {sorted(wanted)} but this node gave {actual} "
            f"(it has {os.cpu_count()} cores); fix placement.*.cores or placement.pool"
        )
    return actual


def set_thread_env(threads: int) -> dict[str, str]:
    """Thread-count variables for OpenMP/MKL libraries loaded after this call; returns what was set."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    os.environ.update(env)
    return env


def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except FileNotFoundError:  # no /proc: pin the calling thread only
        return [0]


def process_tree_cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process and all its descendants, living or exited and reaped.

    vLLM runs its engine core and worker as child processes, so the actor process alone would
    miss most of generation's CPU time.
    """
    proc = psutil.Process(pid)
    t = proc.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in proc.children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system + c.children_user + c.children_system
        except psutil.NoSuchProcess:
            pass
    return float(total)
