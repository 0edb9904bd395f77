"""Async contention figures and where freed capacity went, on hand-made rows (tests/helpers/schedule_rows.py)."""

from __future__ import annotations

import math

import pytest

from rlsim.experiment.asynchronous.analysis import async_runtime_figures
from rlsim.experiment.capacity import per_repeat
from rlsim.experiment.config import ContentionConfig, ContentionSettings
from rlsim.experiment.report import render_markdown
from rlsim.experiment.runner import build_results
from tests.helpers.schedule_rows import POOL_CORES, async_rows

T_975_DF2 = 4.302652729911275
SAME_STALENESS, SAME_IDLE = [0.5, 0.6, 0.4], [0.3, 0.35, 0.32]


def config() -> ContentionConfig:
    settings = ContentionSettings(runtimes=["eager", "fast"], baseline="eager", repeats=3, async_updates=4)
    return ContentionConfig.model_validate({"contention": settings.model_dump(), "loop": {"schedule": "async"}})


def test_more_rollouts_per_hour_is_found_with_a_ci_covering_the_known_gain() -> None:
    # fast trains 1.21, 1.191 and 1.205 times the baseline's rollouts per hour (about +20 %); the same
    # staleness and trainer idle time as the baseline.
    figures = {
        "eager": {
            "rollouts_trained_per_hour": [1000, 1100, 950],
            "mean_staleness": SAME_STALENESS,
            "trainer_idle_fraction": SAME_IDLE,
        },
        "fast": {
            "rollouts_trained_per_hour": [1210, 1310, 1145],
            "mean_staleness": SAME_STALENESS,
            "trainer_idle_fraction": SAME_IDLE,
        },
    }
    a = async_runtime_figures(per_repeat(async_rows(figures)), "fast", "eager")
    logs = [math.log(x / y) for x, y in ((1210, 1000), (1310, 1100), (1145, 950))]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = T_975_DF2 * sd / math.sqrt(3)
    change = a["rollouts_trained_per_hour_change"]
    assert change["mean"] == pytest.approx(math.exp(mean) - 1, abs=1e-6)
    expected = (math.exp(mean - half) - 1, math.exp(mean + half) - 1)
    assert (change["ci_low"], change["ci_high"]) == pytest.approx(expected, abs=1e-6)  # stored to 6 decimals
    assert change["ci_low"] < 0.2 < change["ci_high"]
    assert a["mean_staleness_diff"]["mean"] == 0.0 and a["trainer_idle_fraction_diff"]["mean"] == 0.0
    assert a["rollouts_trained_per_hour"]["mean"] == pytest.approx(1221.666667)
    assert a["freed_went_to"] == ["more_rollouts_per_hour"]


def test_fresher_rollouts_and_less_idle_are_named_strongest_first() -> None:
    figures = {
        "eager": {
            "rollouts_trained_per_hour": [1000, 1000, 1000],
            "mean_staleness": [0.5, 0.6, 0.45],
            "trainer_idle_fraction": [0.3, 0.35, 0.32],
        },
        "fast": {
            "rollouts_trained_per_hour": [1000, 1000, 1000],
            "mean_staleness": [0.2, 0.25, 0.15],  # 0.3, 0.35, 0.3 fresher
            "trainer_idle_fraction": [0.1, 0.15, 0.12],  # 0.2 less idle in every repeat: the tightest
        },
    }
    results = build_results(async_rows(figures), config(), POOL_CORES, complete=True, repeats_done=3)
    a = results["runtimes"]["fast"]["async"]
    assert a["freed_went_to"] == ["less_trainer_idle", "fresher_rollouts"]
    assert a["mean_staleness_diff"]["ci_low"] < -0.3166 < a["mean_staleness_diff"]["ci_high"] < 0
    sentence = next(c for c in results["conclusions"] if c.startswith("Async, **fast**"))
    assert "went to less trainer idle time and fresher rollouts" in sentence
    assert "scoring frees 2.00" in sentence  # 3 - 1 scoring core-s per update


def test_two_repeats_name_no_outcome() -> None:
    # +50 % rollouts per hour in both repeats: a zero-width interval, above 0 by chance of two equal ratios
    same = {"mean_staleness": [0.5, 0.5], "trainer_idle_fraction": [0.3, 0.3]}
    figures = {
        "eager": {"rollouts_trained_per_hour": [1000, 1000], **same},
        "fast": {"rollouts_trained_per_hour": [1500, 1500], **same},
    }
    results = build_results(async_rows(figures), config(), POOL_CORES, complete=True, repeats_done=2)
    assert results["runtimes"]["fast"]["async"]["freed_went_to"] == []
    assert any("No outcome is named from 2 repeats" in c for c in results["conclusions"])


def test_nothing_is_named_when_no_outcome_moved_and_the_report_has_the_async_section() -> None:
    same = {"rollouts_trained_per_hour": [1000, 1100, 950], "mean_staleness": SAME_STALENESS}
    figures = {name: {**same, "trainer_idle_fraction": SAME_IDLE} for name in ("eager", "fast")}
    results = build_results(async_rows(figures), config(), POOL_CORES, complete=True, repeats_done=3)
    assert results["schedule"] == "async" and results["async_updates"] == 4 and "async" in results["units"]
    assert results["runtimes"]["fast"]["async"]["freed_went_to"] == []
    assert any("None of more rollouts per hour" in c for c in results["conclusions"])
    assert not any("Time-boxed" in c for c in results["conclusions"])  # no time-boxed condition under async
    # step time and scoring core-s are per update (the rows' pool is per run of 4 updates)
    assert results["runtimes"]["eager"]["pool_core_s_per_step"]["score"]["mean"] == pytest.approx(3.0)
    text = render_markdown(results, [])
    assert "## Async pipeline per runtime" in text and "pipeline of 4 updates" in text
