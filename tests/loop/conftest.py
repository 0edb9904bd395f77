"""The real-loop tests' shared vLLM engine: one session whose rollout actor the GRPO, PPO and async loop tests use.

vLLM's engine is the slow part of a loop session to start (about 20 s here, inline). The async test's session
starts it (its schedule needs behaviour log-probs from the engine, which the others accept unused); the GRPO,
PPO and generative-judge sessions borrow its rollout actor (``LoopSession(config, rollout=...)``) and start only
their own scorers, trainer, reference and critic. ``SHARED_WORKER`` in tests/conftest.py sends these files to one
xdist worker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.tiny_run import tiny_async_run


@pytest.fixture(scope="session")
def vllm_loop(ray_cluster) -> Iterator[object]:
    """A started ``LoopSession`` of ``tiny_async_run()``; borrow ``.actors.rollout``, never close it."""
    pytest.importorskip("vllm")
    from rlsim.loop.config import RunConfig
    from rlsim.loop.driver import LoopSession

    s = LoopSession(RunConfig.model_validate(tiny_async_run()))
    s.start()
    try:
        yield s
    finally:
        s.close()
