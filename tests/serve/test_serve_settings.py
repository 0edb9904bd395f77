"""ServeSettings.check: every bad setting named at once, with its fix."""

from __future__ import annotations

import pytest

from rlsim.errors import ConfigError
from rlsim.serve.settings import ServeSettings


def test_defaults_are_valid_and_sub_batching_is_on() -> None:
    settings = ServeSettings().check()
    assert 0 < settings.sub_batch_size <= settings.max_batch_size


def test_every_bad_setting_is_listed_together() -> None:
    with pytest.raises(ConfigError) as info:
        ServeSettings(sub_batch_size=-1, max_wait_s=-0.5, max_batch_size=0).check()
    text = str(info.value)
    assert "sub_batch_size must be >= 0" in text and "one pass" in text
    assert "max_wait_s must be >= 0" in text and "max_batch_size must be >= 1" in text


def test_zero_turns_sub_batching_off() -> None:
    assert ServeSettings(sub_batch_size=0).check().sub_batch_size == 0
