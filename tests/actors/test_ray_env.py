"""What rlsim sets before it starts Ray: quiet start-up unless -v, the user's own settings kept."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from rlsim.actors.ray_env import RAY_AUTH_LOGGER, prepare_ray_start
from rlsim.logs import VERBOSE_ENV


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # set-then-delete records each variable, so what prepare_ray_start sets is undone after the test
    for name in ("VLLM_LOGGING_LEVEL", VERBOSE_ENV):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    auth = logging.getLogger(RAY_AUTH_LOGGER)
    level = auth.level
    yield
    auth.setLevel(level)


def test_quiet_by_default() -> None:
    assert prepare_ray_start() == logging.WARNING
    assert os.environ["VLLM_LOGGING_LEVEL"] == "WARNING"
    auth = logging.getLogger(RAY_AUTH_LOGGER)
    # Ray's "token authentication is enabled" warning is dropped; an error from that module still shows.
    assert not auth.isEnabledFor(logging.WARNING) and auth.isEnabledFor(logging.ERROR)


def test_the_users_vllm_level_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")
    prepare_ray_start()
    assert os.environ["VLLM_LOGGING_LEVEL"] == "DEBUG"


def test_verbose_lets_ray_and_vllm_speak(monkeypatch: pytest.MonkeyPatch) -> None:
    prepare_ray_start()  # a quiet start earlier in the process must not stick
    monkeypatch.setenv(VERBOSE_ENV, "1")
    monkeypatch.delenv("VLLM_LOGGING_LEVEL")
    assert prepare_ray_start() == logging.INFO
    assert os.environ["VLLM_LOGGING_LEVEL"] == "INFO"
    assert logging.getLogger(RAY_AUTH_LOGGER).isEnabledFor(logging.WARNING)


def test_the_quieted_logger_is_the_one_ray_warns_from() -> None:
    # If Ray moves the warning to another module, this names the module to update.
    module = pytest.importorskip(RAY_AUTH_LOGGER)
    assert module.logger.name == RAY_AUTH_LOGGER
    with open(module.__file__, encoding="utf-8") as source:
        assert "Token authentication is enabled" in source.read()
