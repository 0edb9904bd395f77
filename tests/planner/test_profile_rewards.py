"""``rewards:`` of a profile config: rule-based rewards timed per rollout into ``reward_functions``, judges timed
on the scorer grid into ``runtimes``, bad sections refused before anything is timed, and the planner using both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from rlsim.config_loader import load_config
from rlsim.errors import ConfigError, RlsimError
from rlsim.planner.measure import build_profile as building
from rlsim.planner.measure.build_profile import ProfileConfig, build_profile
from rlsim.planner.measure.rewards import problem_pair, response_lengths
from rlsim.planner.measure.scorers import ScorerGrid, _time_cell
from rlsim.planner.profile.schema import LatencySample
from rlsim.planner.sim.evaluate import evaluate
from rlsim.planner.spec.cluster import NodeSpec
from rlsim.rewards.math_check import score
from rlsim.scoring.base import ScorerStats
from tests.helpers.planner_cases import fixed_workload, make_profile, placement


def _config(tmp_path: Path, rewards: dict[str, Any], **extra: Any) -> ProfileConfig:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump({"hardware_kind": "test", "rewards": rewards, **extra}))
    return load_config(ProfileConfig, path)


@pytest.mark.parametrize(
    "rewards,extra,expected",
    [
        ({"v": {"runtime": "function", "options": {"target": "no_such_module:f"}}}, {}, "rewards.v: .*no_such_module"),
        ({"v": {"runtime": "function", "options": {"workers": 0}}}, {}, "workers"),
        ({"s": {"runtime": "sandbox", "options": {"program": "response"}}}, {}, "would run nothing"),
        ({"j": {"runtime": "genrm", "options": {"template": "no placeholder"}}}, {}, r"\{response\}"),
        ({"v": {"runtime": "function", "rollouts": 1}}, {}, "rollouts"),
        ({"v": {"runtime": "verifier"}}, {}, "runtime"),
        ({"eager": {"runtime": "function"}}, {"runtimes": ["eager"]}, "also listed in runtimes"),
    ],
)
def test_a_bad_rewards_section_is_a_config_error_before_anything_is_timed(
    tmp_path: Path, rewards: dict[str, Any], extra: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        _config(tmp_path, rewards, **extra)


def test_the_timed_problems_are_checked_in_full() -> None:
    """Every other response carries the right answer, so the checker parses and compares both ways."""
    pairs = [problem_pair(i, 48) for i in range(6)]
    assert [score(p, r) for p, r in pairs] == [1.0, 0.0] * 3
    assert response_lengths([48, 128, 256], 5) == [48, 100, 152, 204, 256]


def test_a_function_reward_is_timed_per_rollout_and_planned_async(tmp_path: Path) -> None:
    """The real math checker in its worker process: one sample per rollout, summarised as mean and cv; a
    re-profile from the stored samples gives the same section; the planner runs it async."""
    config = _config(tmp_path, {"math-verify": {"runtime": "function", "rollouts": 6, "warmup": 1}})
    built = build_profile(config, tmp_path)
    model = built.profile.reward_functions["math-verify"]
    assert model.runtime == "function" and len(model.samples_s) == 6 and all(s > 0 for s in model.samples_s)
    assert model.mean_s == pytest.approx(np.mean(model.samples_s), rel=1e-4)
    assert "reward math-verify (function, one worker)" in built.measured[0]
    again = build_profile(config, tmp_path, measure=False, scorers_from=built.profile)
    assert again.profile.reward_functions["math-verify"] == model

    profile = make_profile().model_copy(update={"reward_functions": built.profile.reward_functions})
    node = NodeSpec(count=1, cores=4, gpus=0, kind="test-kind")
    spec = placement("async", runtime="math-verify", replicas_per_node=2, batcher_window=8)
    ev = evaluate(node, profile, fixed_workload(prompts=2, group=4, response=10), spec, steps=4)
    assert ev.rollouts_per_hour > 0 and ev.extra["async"]["rollouts_total"]["trained"] >= 24


def test_without_timing_a_rule_based_reward_is_listed_as_unmeasured(tmp_path: Path) -> None:
    config = _config(tmp_path, {"math-verify": {"runtime": "function"}})
    with pytest.raises(RlsimError, match="nothing to put in the profile"):
        build_profile(config, tmp_path, measure=False)
    base = make_profile()
    built = build_profile(config, tmp_path, measure=False, fill_from=base)
    assert "reward math-verify: timing skipped (--no-scorers)" in built.unmeasured
    assert built.profile.reward_functions == {}


def test_a_judge_is_timed_on_the_scorer_grid_under_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge runs as runtime ``genrm`` with its options, shows its own name in progress, and its section
    reads texts up to its ``max_model_len`` in real tokens (vLLM pads nothing)."""
    calls: list[dict[str, Any]] = []

    def fake_measure(runtime, reward_model, device, grid, on_cell=None, quiet=None, **kw):  # type: ignore[no-untyped-def]
        calls.append({"runtime": runtime, **kw})
        return [LatencySample(batch=b, padded_tokens=b * n, latency_s=0.02 + 2e-4 * b * n, units=2)
                for b in grid.batch_sizes for n in grid.lengths for _ in range(2)], 512  # fmt: skip

    monkeypatch.setattr(building, "measure_runtime", fake_measure)
    judge = {"runtime": "genrm", "options": {"judge": "tiny-llama", "max_model_len": 384}}
    built = build_profile(_config(tmp_path, {"judge-tiny": judge}), tmp_path)
    assert calls == [{"runtime": "genrm", "options": judge["options"], "label": "judge-tiny"}]
    section = built.profile.runtimes["judge-tiny"]
    assert (section.max_length, section.pads) == (384, False)
    assert section.per_padded_token_s == pytest.approx(2e-4, rel=1e-6)


class _Counting:
    """A scorer whose token counter says 10 tokens a row whatever the texts (a judge's prompt adds its template)."""

    def __init__(self) -> None:
        self.stats = ScorerStats()

    def score_batch(self, texts: list[str]) -> None:
        self.stats.padded_tokens += 10 * len(texts)


def test_a_judge_cell_counts_the_rollouts_tokens_not_the_judges_prompt() -> None:
    grid = ScorerGrid([2], [48], [1], repeats=1, warmup=0)
    own = _time_cell(_Counting(), ["a", "b"], 1, grid, 48)
    rollout = _time_cell(_Counting(), ["a", "b"], 1, grid, 48, rollout_tokens=True)
    assert (own[0].padded_tokens, rollout[0].padded_tokens) == (20, 96)


def test_a_rule_based_loop_is_predicted_on_a_pool_of_its_workers_under_the_profiles_name() -> None:
    """``rlsim plan validate``: a sandbox loop with 3 workers is predicted on a pool of 3; a loop set's
    ``profile_runtime`` lets a judge the profile names ``judge-tiny`` predict a ``genrm`` run."""
    from rlsim.loop.config import load_run_config
    from rlsim.planner.profile.scaling import RewardFunctionModel
    from rlsim.planner.validate.predict import case_profile, knobs_from_run_config

    configs = Path(__file__).resolve().parents[2] / "configs"
    sandbox = load_run_config(configs / "reward_sandbox.yaml", ["reward.sandbox.workers=3", "reward.replicas=1"])
    knobs = knobs_from_run_config(sandbox, cores=2)
    assert (knobs.scorer_replicas, knobs.pool_workers) == (3, 3)
    two = load_run_config(configs / "reward_sandbox.yaml", ["reward.sandbox.workers=2", "reward.replicas=2"])
    assert (knobs_from_run_config(two, cores=2).scorer_replicas, knobs_from_run_config(two, cores=2).pool_workers) == (
        4,
        2,
    )
    eager = load_run_config(configs / "default.yaml")
    assert knobs_from_run_config(eager, cores=2).scorer_replicas == eager.reward.replicas

    profile = make_profile().model_copy(update={"reward_functions": {"bank": RewardFunctionModel(mean_s=0.2)}})
    assert case_profile(profile, "genrm", "const").runtimes["genrm"] == profile.runtimes["const"]
    assert case_profile(profile, "sandbox", "bank").reward_functions["sandbox"].mean_s == 0.2
    assert case_profile(profile, "eager", None) is profile
    with pytest.raises(RlsimError, match="profile_runtime 'judge' is not an entry of the profile \\(it has: bank"):
        case_profile(profile, "genrm", "judge")
