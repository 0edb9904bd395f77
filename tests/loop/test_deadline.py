"""Phase deadlines: what they say when they pass, where they come from, and that a stall is never "handled"."""

from __future__ import annotations

import time

import pytest

from rlsim.errors import RlsimError
from rlsim.loop.config import FaultsConfig
from rlsim.loop.deadline import Deadline, PhaseTimeout, PhaseTimeouts
from rlsim.loop.sync import WeightSync


def test_expired_names_the_phase_what_it_waited_on_and_the_setting() -> None:
    err = PhaseTimeouts(update_s=5).start("update").expired("the trainer actor")
    assert isinstance(err, RlsimError)  # shown as a message, not a traceback
    assert str(err).startswith("the update phase did not finish within 5 s (still waiting on the trainer actor)")
    assert "raise faults.update_timeout_s" in str(err)


def test_remaining_counts_down_to_zero() -> None:
    d = Deadline("update phase", 0.05, "faults.update_timeout_s")
    assert 0 < d.remaining() <= 0.05
    time.sleep(0.06)
    assert d.remaining() == 0.0


def test_each_config_field_sets_its_own_phase() -> None:
    # Distinct values, so a field wired to the wrong phase shows up.
    f = FaultsConfig(generate_timeout_s=1, update_timeout_s=2, sync_timeout_s=3, warmup_timeout_s=4, probe_timeout_s=5)
    t = f.phase_timeouts()
    for phase, seconds in {"generate": 1, "update": 2, "sync": 3, "warmup": 4, "probe": 5}.items():
        deadline = t.start(phase)
        assert deadline.seconds == seconds and deadline.setting == f"faults.{phase}_timeout_s"


def test_defaults_are_generous() -> None:
    t = FaultsConfig().phase_timeouts()
    assert min(t.generate_s, t.update_s, t.sync_s, t.warmup_s) >= 600 and t.probe_s >= 60


def test_a_stalled_reload_fails_instead_of_falling_back_to_the_simulated_cost() -> None:
    # What both backends ask when a reload raised: a stall is raised again, never a reason to simulate.
    sync = WeightSync("auto", 0.5)
    with pytest.raises(PhaseTimeout, match="sync phase"):
        sync.reload_failed(PhaseTimeouts(sync_s=1).start("sync").expired("the rollout actor"))
    assert sync.fallback_reason is None


@pytest.mark.parametrize("field", ["score_timeout_s", "generate_timeout_s", "sync_timeout_s", "http_stall_s"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, 0.0, -1.0])
def test_a_deadline_that_is_not_a_finite_positive_number_up_to_a_week_is_a_config_error(
    field: str, value: float
) -> None:
    """Infinity or 1e300 would overflow the waits a deadline reaches (select, Ray's wait): refused up front."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=field):
        FaultsConfig(**{field: value})
    assert getattr(FaultsConfig(**{field: 7 * 86400.0}), field) == 7 * 86400.0
