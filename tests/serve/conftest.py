"""Fixtures for the server tests: real servers on 127.0.0.1 running the ``test-tiny`` runtime."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from rlsim.scoring.base import ScorerSettings
from rlsim.serve.runner import make_server
from rlsim.serve.settings import ServeSettings
from tests.helpers.serve_helpers import Running, backend_factory, wait_ready
from tests.helpers.tiny_scorer import TinyScorer, tiny_spec


@pytest.fixture(scope="session")
def tiny_scorer_factory() -> Callable[..., TinyScorer]:
    def make(max_length: int = 32) -> TinyScorer:
        return TinyScorer(tiny_spec(max_length), ScorerSettings())

    return make


@pytest.fixture
def start_server(tiny_scorer_factory: Callable[..., TinyScorer]) -> Iterator[Callable[..., Running]]:
    """``start_server(scorer=None, factory=None, wait=True, **settings)`` -> a running server on loopback."""
    running: list[Running] = []

    def start(scorer: Any = None, factory: Any = None, wait: bool = True, **overrides: Any) -> Running:
        settings = replace(ServeSettings(runtime="test-tiny", model="tiny-test", port=0, warmup=False), **overrides)
        scorer = scorer if scorer is not None or factory is not None else tiny_scorer_factory()
        server, sock = make_server(settings, factory or backend_factory(scorer, settings))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        r = Running(url, server, thread, scorer, server.config.app.state.rlsim)
        running.append(r)
        if wait:
            wait_ready(url)
        return r

    yield start
    for r in running:
        if r.scorer is not None and hasattr(r.scorer, "gate"):
            r.scorer.gate.set()
        r.stop()
