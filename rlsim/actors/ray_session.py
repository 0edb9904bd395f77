"""Connecting this process to Ray: the one place rlsim calls ``ray.init``.

``rlsim run``, the planner's validation runs and the contention experiment all start (or join) Ray
here, so each gets the same quiet logs, the same "local" rule and a SIGTERM that unwinds.
"""

from __future__ import annotations

import os

import ray

from rlsim.actors.ray_env import prepare_ray_start
from rlsim.signals import unwind_on_sigterm


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
        cpus = num_cpus or len(os.sched_getaffinity(0))
        # "local": a plain ray.init() would join the newest cluster started on this machine (its address
        # is left in /tmp/ray), e.g. someone else's, which is not what `address: null` promises.
        ray.init(
            address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level=ray_logging
        )
    # Ray's driver handler aborts on SIGTERM and leaves its agents running (rlsim/signals.py).
    unwind_on_sigterm()
    return True
