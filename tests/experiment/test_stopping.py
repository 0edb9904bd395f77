"""The stopping rule, driven by a fake repeat runner and a fake clock: no Ray, answers worked by hand."""

from __future__ import annotations

import pytest

from rlsim.experiment.stopping import (
    Precision,
    StopRule,
    precision_from_rows,
    precision_of,
    projection,
    run_repeats,
    stop_reason,
    stopped_by,
)
from tests.helpers.recorded import rows

REPEAT_S = 300.0  # every fake repeat takes 5 minutes on the fake clock
BASELINE_COST = 2.0  # core-s: the baseline's scoring cost, for the 5 % floor


class FakeExperiment:
    """Each repeat "measures" the next freed core-s value of each runtime and advances the clock."""

    def __init__(self, freed: dict[str, list[float]], target_ci: float | None) -> None:
        self.freed, self.target_ci = freed, target_ci
        self.now, self.done = 0.0, 0
        self.seen: list[dict[str, Precision]] = []

    def clock(self) -> float:
        return self.now

    def run(self, repeat: int) -> None:
        assert repeat == self.done
        self.now += REPEAT_S
        self.done += 1

    def measure(self) -> dict[str, Precision]:
        out = {rt: precision_of(v[: self.done], BASELINE_COST, self.target_ci) for rt, v in self.freed.items()}
        return {rt: p for rt, p in out.items() if p is not None}

    def go(self, rule: StopRule):  # noqa: ANN201
        return run_repeats(rule, self.run, self.measure, self.clock, lambda s: self.seen.append(dict(s.precision)))


def test_stops_on_the_target_but_not_before_three_repeats() -> None:
    # Spread of +-1 %: after 2 repeats ([1.0, 1.01]: half-width 12.706 x 0.00707 / sqrt 2 = 0.0635 <= 0.1) the
    # target is already met, but two repeats are too few to trust an sd: it stops after the third.
    fake = FakeExperiment({"fast": [1.0, 1.01, 0.99, 1.0, 1.0, 1.0]}, target_ci=0.10)
    out = fake.go(StopRule(repeats=None, target_ci=0.10, max_minutes=60))
    assert fake.seen[0] == {}  # one repeat: no interval yet
    assert fake.seen[1]["fast"].met  # met after 2, yet it went on
    assert (out.repeats_done, out.reason) == (3, "target")
    assert stopped_by(out.reason, out.precision["fast"]) == "target"
    assert out.durations == [REPEAT_S] * 3


def test_stops_on_the_budget_before_a_repeat_that_would_end_past_it() -> None:
    # 5-minute repeats, 20-minute budget: after 3 (15 min) a 4th ends at 20 <= 20, so it runs; after
    # 4 (20 min) a 5th would end at 25 > 20: stop. The spread is far too wide for 10 %.
    freed = [1.0, 0.5, 1.5, 0.7, 1.3, 0.9]
    fake = FakeExperiment({"slow": freed, "fast": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]}, target_ci=0.10)
    out = fake.go(StopRule(repeats=None, target_ci=0.10, max_minutes=20))
    assert (out.repeats_done, out.reason) == (4, "minutes")
    slow = out.precision["slow"]
    assert stopped_by(out.reason, slow) == "budget"
    assert stopped_by(out.reason, out.precision["fast"]) == "target"  # it met its own target
    # [1.0, 0.5, 1.5, 0.7]: mean 0.925, sd 0.4349; target 0.0925 core-s -> the fewest n with
    # t(n-1) x 0.4349 / sqrt(n) <= 0.0925 is 88 (n = 88: 1.9876 x 0.4349 / 9.381 = 0.0922;
    # n = 87: 1.9879 x 0.4349 / 9.327 = 0.0927).
    assert slow.mean == pytest.approx(0.925) and slow.sd == pytest.approx(0.434933, abs=1e-6)
    assert (slow.repeats_needed, slow.further_repeats) == (88, 84)


def test_a_fixed_count_ignores_the_target_and_the_budget_never_stops_before_two() -> None:
    fake = FakeExperiment({"fast": [1.0, 1.0, 1.0, 1.0]}, target_ci=0.10)
    assert fake.go(StopRule(repeats=4, target_ci=0.10, max_minutes=None)).repeats_done == 4
    tiny = FakeExperiment({"fast": [1.0, 2.0, 3.0]}, target_ci=None)
    out = tiny.go(StopRule(repeats=None, target_ci=None, max_minutes=1))  # one repeat is already past it
    assert (out.repeats_done, out.reason) == (2, "minutes")
    assert stopped_by(out.reason, out.precision["fast"]) == "budget"  # no target: the budget stopped it
    assert stopped_by(None, out.precision["fast"]) is None  # still running


def test_a_near_zero_effect_is_held_to_the_floor_not_to_its_own_mean() -> None:
    # freed [0.01, -0.01, 0.02]: mean 0.00667; 10 % of it would be 0.00067 core-s, out of reach.
    # The floor: 10 % x max(0.00667, 5 % x 2.0 core-s) = 0.01 core-s.
    p = precision_of([0.01, -0.01, 0.02], BASELINE_COST, 0.10)
    assert p is not None and p.target_half_width == pytest.approx(0.01)
    assert precision_of([1.0], BASELINE_COST, 0.10) is None  # no interval from one repeat


def test_stop_reason_without_any_compared_runtime_still_needs_three_repeats() -> None:
    rule = StopRule(repeats=None, target_ci=0.1, max_minutes=60)
    assert stop_reason(rule, 2, [60.0, 60.0], 120.0, {}) is None
    assert stop_reason(rule, 3, [60.0] * 3, 180.0, {}) == "target"


def test_precision_from_recorded_rows() -> None:
    # recorded.py: freed = eager 3.0, 3.2, 3.4 - fast 1.0, 1.1, 1.2 = 2.0, 2.1, 2.2 (mean 2.1, sd 0.1),
    # half-width 4.3027 x 0.1 / sqrt 3 = 0.2484; target 10 % x 2.1 = 0.21 -> not met; 4 repeats reach
    # 3.1824 x 0.1 / 2 = 0.159 <= 0.21, so one more.
    p = precision_from_rows(rows(), ["eager", "fast"], "eager", 0.10)
    assert list(p) == ["fast"]
    fast = p["fast"]
    assert fast.half_width == pytest.approx(0.248414, abs=1e-5) and fast.met is False
    assert (fast.repeats_needed, fast.further_repeats) == (4, 1)
    assert fast.as_dict()["half_width_fraction"] == pytest.approx(0.248414 / 2.1, abs=1e-5)


def test_the_progress_suffix_shows_half_widths_and_the_projection() -> None:
    p = precision_from_rows(rows(), ["eager", "fast"], "eager", 0.10)
    text = projection(p, [600.0, 600.0, 600.0], 0.10)
    # one more repeat at the mean repeat time of 10 minutes
    assert text == " | freed core-s CI fast ±12% (target 10%: ~1 more repeat, ~10 min)"
    assert projection(p, [600.0], None) == " | freed core-s CI fast ±12%"
