"""The ``function`` and ``sandbox`` runtimes as scorers, and their config sections."""

import pytest

from rlsim.errors import ConfigError, RlsimError
from rlsim.models import resolve_reward_model
from rlsim.scoring import ScorerSettings, make_scorer
from rlsim.scoring.base import SCORERS, CountingScorer, PairScorer, expand_runtimes, runtime_names

FNS = "tests.helpers.reward_fns"  # importable in the worker processes too: the repo root is on sys.path


@pytest.fixture(scope="module")
def model():
    return resolve_reward_model("minilm-rm")


def test_function_scores_pairs_and_counts_timeouts_with_the_default(model):
    scorer = make_scorer("function", model, ScorerSettings(options={"target": f"{FNS}:sleepy", "timeout_s": 0.5,
                                                                    "default_reward": -1.0}))  # fmt: skip
    try:
        assert isinstance(scorer, PairScorer) and isinstance(scorer, CountingScorer)
        assert list(scorer.score_pairs(["", ""], ["0", "20"])) == [1.0, -1.0]
        assert scorer.take_outcomes() == {"timeouts": 1}
        assert scorer.take_outcomes() == {}
    finally:
        scorer.close()


def test_function_on_timeout_fail_and_on_error_fail_name_the_setting(model):
    scorer = make_scorer("function", model, ScorerSettings(options={"target": f"{FNS}:sleepy", "timeout_s": 0.3,
                                                                    "on_timeout": "fail"}))  # fmt: skip
    try:
        with pytest.raises(RlsimError, match="reward.function.timeout_s"):
            scorer.score_pairs([""], ["20"])
    finally:
        scorer.close()
    scorer = make_scorer("function", model, ScorerSettings(options={"target": f"{FNS}:raises"}))
    try:
        with pytest.raises(RlsimError, match="ValueError: bad answer.*on_error"):
            scorer.score_pairs([""], ["x"])
    finally:
        scorer.close()


def test_the_builtin_math_checker_in_the_pool(model):
    scorer = make_scorer("function", model, ScorerSettings(options={"workers": 2}))
    try:
        assert list(scorer.score_pairs(["What is 6*7?"] * 3, ["42", r"\boxed{42}", "41"])) == [1.0, 1.0, 0.0]
    finally:
        scorer.close()


def test_sandbox_runs_the_responses_code(model):
    scorer = make_scorer("sandbox", model, ScorerSettings(options={"program": "response", "wall_s": 2}))
    try:
        responses = ["```python\nassert 2 + 2 == 4\n```", "```python\nassert 2 + 2 == 5\n```", "no code",
                     "```python\nimport time; time.sleep(30)\n```"]  # fmt: skip
        assert list(scorer.score_pairs([""] * 4, responses)) == [1.0, 0.0, 0.0, 0.0]
        assert scorer.take_outcomes() == {"programs_run": 3, "passed": 1, "no_program": 1, "timeouts": 1}
    finally:
        scorer.close()


def test_bad_options_are_config_errors(model):
    for options, where in [({"workers": 0}, "sandbox: workers"), ({"workers": 10**6}, "sandbox: workers"),
                           ({"wall_s": 0}, "sandbox: wall_s"), ({"memory_mb": 0}, "sandbox: memory_mb"),
                           ({"nope": 1}, "sandbox: nope")]:  # fmt: skip
        with pytest.raises(ConfigError, match=where):
            make_scorer("sandbox", model, ScorerSettings(options=options))
    with pytest.raises(ConfigError, match="no callable 'nope'"):
        make_scorer("function", model, ScorerSettings(options={"target": f"{FNS}:nope"}))


def test_rewards_that_are_no_model_stay_out_of_the_model_sets():
    assert SCORERS.info("function").kind == "function" and SCORERS.info("sandbox").kind == "sandbox"
    assert not {"function", "sandbox"} & set(runtime_names() + runtime_names(variants=True))
    assert "sandbox" not in expand_runtimes("all,variants") and expand_runtimes("sandbox") == ["sandbox"]


def test_verify_refuses_rewards_that_are_no_model(capsys):
    from rlsim.cli.main import main

    assert main(["verify", "--runtimes", "eager,sandbox"]) == 2
    assert "sandbox score without a reward model" in capsys.readouterr().err
