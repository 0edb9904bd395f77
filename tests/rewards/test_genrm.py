"""The ``genrm`` runtime: a judge LLM's verdict log-probability or parsed score as the reward.

The fast tests check the config section, the prompt building and the readings with no engine; the slow ones read
one real vLLM engine of the tiny-llama judge both ways: the verdict's log-probability against one worked by hand
with transformers on the same token ids, and a decoded answer parsed or counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest

from rlsim.config_loader import validate
from rlsim.errors import ConfigError, RlsimError
from rlsim.loop.config import RunConfig
from rlsim.rewards.genrm_reward import JudgePrompts, first_number, special_prefix, verdict_logprob
from rlsim.rewards.options import GenrmOptions, parse_options
from rlsim.scoring.base import SCORERS, expand_runtimes, runtime_names


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from rlsim.models import resolve_policy

    return AutoTokenizer.from_pretrained(str(resolve_policy("tiny-llama")))


@pytest.mark.parametrize(
    ("template", "named"),
    [
        ("Rate this: {prompt}", "must hold {response} exactly once (it has it 0 times)"),
        ("{response} and again {response}", "exactly once (it has it 2 times)"),
        ("{prompt} {response} vs {reference}", "names ['reference']"),
        ("{response} {", "does not parse"),
    ],
)
def test_a_template_without_one_response_placeholder_is_a_config_error(template: str, named: str) -> None:
    with pytest.raises(ConfigError, match="template") as err:
        parse_options("genrm", {"template": template})
    assert named in str(err.value)


def test_bad_genrm_settings_are_config_errors_before_anything_starts() -> None:
    for options, where in [
        ({"judge": "no-such-judge"}, "neither a built-in policy"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"verdict": ""}, "verdict"),
        ({"score_max": 0}, "score_max"),
        ({"mode": "vibes"}, "mode"),
    ]:
        with pytest.raises(ConfigError, match=where):
            parse_options("genrm", options)
    with pytest.raises(ConfigError, match="reward.on_timeout does not apply to runtime genrm"):
        validate(RunConfig, {"reward": {"runtime": "genrm", "on_timeout": "drop"}}, source="run config")
    config = RunConfig.model_validate({"reward": {"runtime": "eager", "genrm": {"mode": "score"}}})
    assert config.reward.section_problems() == ["reward.genrm: applies to reward.runtime: genrm (it is eager)"]
    literal = parse_options("genrm", {"template": "{{json}} {response}"})  # a literal brace is written doubled
    assert literal.template == "{{json}} {response}"


def test_the_judge_is_a_reward_that_is_no_model() -> None:
    assert SCORERS.info("genrm").kind == "judge"
    assert "genrm" not in runtime_names() + runtime_names(variants=True)
    assert expand_runtimes("genrm") == ["genrm"]
    config = RunConfig.model_validate({"reward": {"runtime": "genrm", "genrm": {"mode": "score", "max_tokens": 4}}})
    assert config.reward.options()["mode"] == "score" and config.reward.options()["max_tokens"] == 4


@pytest.mark.parametrize(
    ("text", "value"),
    [("Score: 7/10", 7.0), ("-2.5 points", -2.5), ("I give it 10.", 10.0), ("no number here", None), ("", None)],
)
def test_the_first_number_of_the_answer(text: str, value: float | None) -> None:
    assert first_number(text) == value


def test_a_score_pattern_reads_its_group() -> None:
    roll = r"Score: ([0-9.]+)"  # ROLL's LLMJudgeRewardWorker format
    assert first_number("3 steps. Score: 8", roll) == 8.0 and first_number("I rate it 8", roll) is None
    assert first_number("Score: .", roll) is None  # matched, but no number
    with pytest.raises(ConfigError, match="score_pattern: .*2 groups"):
        parse_options("genrm", {"score_pattern": r"(\d)/(\d)"})
    with pytest.raises(ConfigError, match="not a regular expression"):
        parse_options("genrm", {"score_pattern": "(unclosed"})


def test_prompts_fill_the_template_append_the_verdict_and_cut_the_response_to_fit(tokenizer) -> None:
    options = GenrmOptions(template="Q: {prompt}\nA: {response}\nOK?", verdict=" Yes", max_model_len=64)
    prompts = JudgePrompts(tokenizer, options)
    enc = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    ids, cut = prompts.build("two plus two", "four")
    assert cut == 0
    assert ids == special_prefix(tokenizer) + enc("Q: two plus two\nA: ") + enc("four") + enc("\nOK?") + enc(" Yes")
    long_ids, cut = prompts.build("two plus two", "four " * 200)
    assert cut > 0 and len(long_ids) == 64 - 1  # room for the one token the engine must produce
    assert long_ids[-len(prompts.verdict_ids) :] == prompts.verdict_ids  # the verdict stays last
    with pytest.raises(RlsimError, match="leaves no room for the response"):
        JudgePrompts(tokenizer, GenrmOptions(max_model_len=32)).build("word " * 40, "x")


def test_a_context_longer_than_the_judge_reads_is_refused_before_its_engine_starts() -> None:
    from rlsim.rewards.genrm_reward import JudgeEngine
    from rlsim.scoring import ScorerSettings

    with pytest.raises(RlsimError, match="max_model_len 4096 is longer than the judge tiny-llama reads .*512"):
        JudgeEngine("tiny-llama", ScorerSettings(), max_model_len=4096)


def test_the_verdict_reading_sums_the_log_probs_of_its_own_tokens() -> None:
    lp = lambda v: SimpleNamespace(logprob=v)  # noqa: E731  (vLLM's Logprob)
    token_ids = [1, 5, 9, 4]
    prompt_logprobs = [None, {5: lp(-0.1)}, {9: lp(-1.5), 3: lp(-0.2)}, {4: lp(-0.25), 9: lp(-0.01)}]
    assert verdict_logprob(prompt_logprobs, token_ids, 2) == pytest.approx(-1.75)
    assert verdict_logprob(prompt_logprobs, token_ids, 1) == pytest.approx(-0.25)


# The real engine, read both ways ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def judge() -> Iterator[object]:
    pytest.importorskip("vllm")
    from rlsim.rewards.genrm_reward import JudgeEngine
    from rlsim.scoring import ScorerSettings

    # Inline (in this process): a spawned engine costs ~20 s more to start and ~4 s to stop here; where vLLM's
    # engine runs is rlsim.rollout.vllm_processes's, shared with the scorer and the generator, whose tests spawn it.
    engine = JudgeEngine("tiny-llama", ScorerSettings(threads=2, engine_inline=True), max_model_len=256)
    try:
        yield engine
    finally:
        engine.close()


def _reader(judge, **options):
    from rlsim.models import resolve_reward_model
    from rlsim.rewards.genrm_reward import GenrmReward
    from rlsim.scoring import ScorerSettings

    settings = ScorerSettings(options={"max_model_len": 256, **options})
    return GenrmReward(resolve_reward_model("minilm-rm"), settings, engine=judge)


PAIRS = (["What is 6*7?", "Name a colour.", "What is 6*7?"], ["42", "blue, or perhaps green", "It is 41."])


@pytest.mark.slow
def test_the_verdict_reward_is_the_judge_log_probability_worked_by_hand(judge, tokenizer) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    reader = _reader(judge, mode="verdict", verdict=" Yes")
    rewards = reader.score_pairs(*PAIRS)
    model = AutoModelForCausalLM.from_pretrained(str(judge.path), dtype=torch.float32).eval()
    n = len(reader.prompts.verdict_ids)
    for (prompt, response), reward in zip(zip(*PAIRS, strict=True), rewards, strict=True):
        ids, _ = reader.prompts.build(prompt, response)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        logp = torch.log_softmax(logits, dim=-1)
        by_hand = sum(float(logp[pos - 1, ids[pos]]) for pos in range(len(ids) - n, len(ids)))
        assert reward == pytest.approx(by_hand, abs=2e-3)
    assert len(set(np.round(rewards, 4))) == 3  # the reading depends on the response
    prefilled = sum(len(reader.prompts.build(p, r)[0]) for p, r in zip(*PAIRS, strict=True))
    assert reader.take_outcomes() == {"judge_prompt_tokens": prefilled} and reader.stats.sequences == 3


@pytest.mark.slow
def test_the_score_reward_parses_the_decoded_answer_or_counts_it_unparsed(judge) -> None:
    reader = _reader(judge, mode="score", max_tokens=6, score_max=10, default_reward=-1.0)
    rewards = reader.score_pairs(*PAIRS)
    answers = reader.last_answers
    assert len(answers) == 3
    expected = [first_number(a) / 10 if first_number(a) is not None else -1.0 for a in answers]
    assert list(rewards) == pytest.approx(expected)
    outcomes = reader.take_outcomes()
    assert 0 < outcomes["judge_tokens_decoded"] <= 3 * 6
    assert outcomes.get("unparsed", 0) == sum(first_number(a) is None for a in answers)
    # A random-weight judge never writes "Score: N": every answer is unparsed, and on_unparsed decides.
    strict = {"mode": "score", "max_tokens": 6, "score_pattern": r"Score: ([0-9.]+)"}
    failing = _reader(judge, **strict, on_unparsed="fail")
    with pytest.raises(RlsimError, match="no score_pattern match.*on_unparsed: fail"):
        failing.score_pairs(*PAIRS)
    dropping = _reader(judge, **strict, on_unparsed="drop")
    assert np.isnan(dropping.score_pairs(*PAIRS)).all()
    counted = dropping.take_outcomes()
    assert counted["unparsed"] == counted["dropped"] == 3
