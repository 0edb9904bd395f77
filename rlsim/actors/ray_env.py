"""What a Ray that rlsim starts (and its workers) inherit: quiet start-up logs unless ``-v``.

Called right before each ``ray.init`` in rlsim; plain Python, no Ray import, so it is cheap to test.
"""

from __future__ import annotations

import logging
import os

from rlsim.logs import verbose

# Ray >= 2.5x turns token authentication on for every new local cluster and warns, on each start, that it did
# ("Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out";
# ray-project/ray#64755). The documented way to choose the mode without the warning, RAY_AUTH_MODE=token, only
# works when set before `import ray`: Ray caches the mode at import, and set later the driver talks to its own
# new cluster without the token (seen: "InvalidAuthToken: Authentication token is missing or incorrect").
# So authentication stays on, as Ray chose, and only the logger of that module is quieted.
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def prepare_ray_start() -> int:
    """Set up logging and the environment for ``ray.init``; returns the ``logging_level`` to pass it.

    The returned level is for the driver's "ray" logger: INFO would add "Started a local Ray instance." and
    the token file's path to a newcomer's first screen. Values the user set in the environment are kept.
    """
    loud = verbose()
    # vLLM's own logging would tear through the progress bar (its workers inherit this).
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if loud else "WARNING")
    logging.getLogger(RAY_AUTH_LOGGER).setLevel(logging.NOTSET if loud else logging.ERROR)
    return logging.INFO if loud else logging.WARNING
