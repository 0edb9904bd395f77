"""Connecting this process to Ray: the one place rlsim calls ``ray.init``.

``rlsim run``, the planner's validation runs and the contention experiment all start (or join) Ray
here, so each gets the same quiet logs, the same "local" rule and a SIGTERM that unwinds.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from pathlib import Path

import ray

from rlsim.actors.ray_env import prepare_ray_start
from rlsim.errors import RlsimError
from rlsim.signals import unwind_on_sigterm

# Ray counts a disk as full when 1 - available/capacity reaches this fraction (its system setting
# ``local_fs_capacity_threshold``, default 0.95, read from RAY_local_fs_capacity_threshold; a threshold of 1 or more
# turns the check off: ray-project/ray src/ray/common/file_system_monitor.cc, ``CheckIfAnyPathOverCapacity`` and
# ``OverCapacityImpl``): it then refuses to spill or create objects, and a step dies mid-way with OutOfDiskError.
# Note "available", not df's "Used": on a disk with reserved blocks Ray's figure is the higher one.
RAY_DISK_THRESHOLD = 0.95


def connect_ray(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Use a Ray already connected in this process, else join ``address``, else start one here.

    ``num_cpus``: Ray's CPU count for a Ray started here (None: the cores this process may run on);
    bookkeeping only, real sharing comes from pinning. Returns True if this call started Ray, so the
    caller should stop it (``ray.shutdown()``).
    """
    if ray.is_initialized():
        return False
    # vLLM's own logging and Ray's start-up lines would tear through the progress bar (quiet unless -v).
    ray_logging = prepare_ray_start()
    if address:
        ray.init(address=address, log_to_driver=False, logging_level=ray_logging)
    else:
        problem = disk_room_problem(ray_temp_dir(), ray_disk_threshold())
        if problem:
            raise RlsimError(problem)
        cpus = num_cpus or len(os.sched_getaffinity(0))
        # "local": a plain ray.init() would join the newest cluster started on this machine (its address
        # is left in /tmp/ray), e.g. someone else's, which is not what `address: null` promises.
        ray.init(
            address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level=ray_logging
        )
    # Ray's driver handler aborts on SIGTERM and leaves its agents running (rlsim/signals.py).
    unwind_on_sigterm()
    return True


def ray_temp_dir() -> Path:
    """Where a Ray started here keeps its session and spills objects: RAY_TMPDIR, else the system's temp folder."""
    return Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir())


def ray_disk_threshold() -> float:
    """Ray's full-disk fraction, as the environment sets it for the Ray about to start."""
    raw = os.environ.get("RAY_local_fs_capacity_threshold")
    try:
        value = float(raw) if raw else RAY_DISK_THRESHOLD
    except ValueError:
        return RAY_DISK_THRESHOLD  # Ray itself will refuse the value; not this check's to name
    return value if math.isfinite(value) else RAY_DISK_THRESHOLD


def disk_room_problem(folder: Path, threshold: float) -> str | None:
    """Why a Ray started with its temp folder in ``folder`` would fail on a full disk, or None.

    Checked before ``ray.init`` so a nearly full disk is one clear line at start-up, not an OutOfDiskError
    from some actor half-way through a step."""
    if threshold >= 1:  # Ray's own reading: the check is off
        return None
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    usage = shutil.disk_usage(existing)
    if usage.total <= 0:
        return None
    used = 1 - usage.free / usage.total
    if used < threshold:
        return None
    need = (used - threshold) * usage.total + 1e9  # past the line, plus a GB of room for the run's own objects
    return (
        f"the disk holding Ray's temp folder ({existing}) is {used:.0%} full by Ray's measure (1 - available/size; "
        f"{usage.free / 1e9:.1f} of {usage.total / 1e9:.0f} GB available) and Ray treats {threshold:.0%} as full: "
        f"it would refuse to create objects and the run would fail mid-step. Free at least {need / 1e9:.1f} GB "
        "there, or set RAY_TMPDIR to a folder on a disk with room"
    )
