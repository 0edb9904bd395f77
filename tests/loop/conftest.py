"""The real-loop tests' shared vLLM engine: one session whose rollout actor every real-loop test on vLLM uses.

vLLM's engine is the slow part of a loop session to start (about 20 s here, inline). The async test's session
starts it (its schedule needs behaviour log-probs from the engine, which the others accept unused); the GRPO,
PPO, judge, verifier and sandbox sessions borrow its rollout actor (``LoopSession(config, rollout=...)``) and
start only their own scorers, trainer, reference and critic. ``SHARED_WORKER`` in tests/conftest.py sends these
files to one xdist worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

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


@pytest.fixture(scope="session")
def borrowing(vllm_loop) -> Callable[[dict[str, Any]], AbstractContextManager[Any]]:
    """``with borrowing(config) as session``: a started ``LoopSession`` of the config dict on the shared engine,
    closed (its own actors only) on leaving."""
    from rlsim.loop.config import RunConfig
    from rlsim.loop.driver import LoopSession

    @contextmanager
    def start(config: dict[str, Any]) -> Iterator[Any]:
        s = LoopSession(RunConfig.model_validate(config), rollout=vllm_loop.actors.rollout)
        s.start()
        try:
            yield s
        finally:
            s.close()

    return start
