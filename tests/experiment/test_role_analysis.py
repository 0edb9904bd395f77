"""PPO's per-role figures and where freed capacity went, on hand-made rows (tests/helpers/schedule_rows.py)."""

from __future__ import annotations

import math
import statistics

import pytest

from rlsim.experiment.capacity import per_repeat
from rlsim.experiment.config import ContentionConfig, ContentionSettings
from rlsim.experiment.report import render_markdown
from rlsim.experiment.role_analysis import role_figures
from rlsim.experiment.runner import UNITS, build_results
from tests.helpers.recorded import rows as grpo_rows
from tests.helpers.schedule_rows import POOL_CORES, ppo_rows

T_975_DF3 = 3.182446305284263  # Student t quantile, 97.5 %, 3 degrees of freedom
NOISE = (0.1, -0.1, 0.2, -0.2)


def config() -> ContentionConfig:
    settings = ContentionSettings(runtimes=["eager", "fast"], baseline="eager", repeats=4)
    return ContentionConfig.model_validate(
        {"contention": settings.model_dump(), "loop": {"trainer": {"algorithm": "ppo"}, "kl": {"coef": 0.05}}}
    )


def test_core_seconds_per_role_per_step() -> None:
    f = role_figures(per_repeat(ppo_rows({"critic": 3.0})), "eager", "eager", POOL_CORES)
    core = {role: e["mean"] for role, e in f["core_s_per_step"].items()}
    assert core == pytest.approx({"rollout": 12.0, "scorer": 10.0, "reference": 4.0, "critic": 4.0, "trainer": 6.0})
    assert "freed_went_to" not in f  # the baseline is not compared with itself


def test_the_freed_capacity_that_went_to_the_critic_is_found_with_a_ci_covering_it() -> None:
    # fast frees 6 core-s of scoring; the critic takes 3 more, the reference 1 more, the step is 0.5 s
    # shorter (2 cores x 0.5 s = 1 core-s) and idle takes the remaining 1 (less the critic's noise).
    f = role_figures(per_repeat(ppo_rows({"critic": 3.0, "reference": 1.0}, noise=NOISE)), "fast", "eager", POOL_CORES)
    went = f["freed_went_to"]
    half = T_975_DF3 * statistics.stdev(NOISE) / math.sqrt(4)
    assert went["critic"]["mean"] == pytest.approx(3.0)
    assert (went["critic"]["ci_low"], went["critic"]["ci_high"]) == pytest.approx((3.0 - half, 3.0 + half), abs=1e-5)
    assert went["critic"]["ci_low"] < 3.0 < went["critic"]["ci_high"]
    assert went["reference"]["mean"] == pytest.approx(1.0) and went["rollout"]["mean"] == pytest.approx(0.0)
    assert went["shorter_step"]["mean"] == pytest.approx(1.0) and went["idle"]["mean"] == pytest.approx(1.0)
    # the destinations add up to the freed 6 core-s (the rows' identity holds exactly)
    assert sum(e["mean"] for e in went.values()) == pytest.approx(6.0)
    assert f["destination"] == "critic"
    assert f["significance"]["critic"]["significant"] is True


@pytest.mark.parametrize(
    ("moved", "saved_s", "destination"),
    [({"rollout": 3.5}, 0.5, "rollout"), ({}, 2.5, "shorter_step"), ({"trainer": 4.0}, 0.0, "trainer")],
)
def test_the_words_name_where_most_went(moved: dict, saved_s: float, destination: str) -> None:
    results = build_results(ppo_rows(moved, saved_s), config(), POOL_CORES, complete=True, repeats_done=4)
    assert results["algorithm"] == "ppo" and "roles" in results["units"]
    roles = results["runtimes"]["fast"]["roles"]
    assert roles["destination"] == destination
    words = {"rollout": "generation", "shorter_step": "a shorter step", "trainer": "the trainer"}[destination]
    sentence = next(c for c in results["conclusions"] if c.startswith("PPO roles, **fast**"))
    assert f"Most went to {words} " in sentence
    assert "scoring frees 6.00" in sentence  # the freed core-s, from the headline figure


def test_no_destination_is_named_when_every_interval_includes_zero() -> None:
    # the critic takes +3, -3, 0 and idle the rest of the freed 6 (3, 9, 6): both intervals include 0
    rows = ppo_rows({}, 0.0, noise=(3.0, -3.0, 0.0))
    results = build_results(rows, config(), POOL_CORES, complete=True, repeats_done=3)
    roles = results["runtimes"]["fast"]["roles"]
    assert roles["destination"] is None and roles["freed_core_s"]["mean"] == pytest.approx(6.0)
    assert roles["freed_went_to"]["idle"]["ci_low"] < 0 < roles["freed_went_to"]["critic"]["ci_high"]
    assert any("No destination took a share" in c for c in results["conclusions"])


def test_two_repeats_name_no_destination_even_with_a_zero_width_interval() -> None:
    # The critic takes exactly +3 in both repeats: a zero-width interval, above 0 by chance of two equal values.
    rows = ppo_rows({"critic": 3.0}, noise=(0.0, 0.0))
    results = build_results(rows, config(), POOL_CORES, complete=True, repeats_done=2)
    roles = results["runtimes"]["fast"]["roles"]
    assert roles["freed_went_to"]["critic"]["ci_low"] == pytest.approx(3.0) and roles["destination"] is None
    assert any("No destination is named from 2 repeats (at least 3" in c for c in results["conclusions"])


def test_the_report_has_the_roles_section_and_grpo_output_has_none_of_it() -> None:
    ppo = build_results(ppo_rows({"critic": 3.0}), config(), POOL_CORES, complete=True, repeats_done=4)
    text = render_markdown(ppo, [])
    assert "## PPO roles: core-seconds per together step" in text and "| fast |" in text
    assert set(ppo["runtimes"]["fast"]["pool_core_s_per_step"]) >= {"reference", "critic"}

    grpo_config = ContentionConfig(contention=ContentionSettings(runtimes=["eager", "fast"], repeats=3))
    grpo = build_results(grpo_rows(), grpo_config, POOL_CORES, complete=True, repeats_done=3)
    assert not {"algorithm", "schedule", "async_updates"} & set(grpo) and grpo["units"] == UNITS
    for f in grpo["runtimes"].values():
        assert "roles" not in f and "async" not in f
        assert list(f["pool_core_s_per_step"]) == [
            "generate",
            "score",
            "update",
            "orchestration",
            "other processes",
            "kernel",
            "idle",
        ]
    assert "PPO roles" not in render_markdown(grpo, []) and "Async" not in render_markdown(grpo, [])
