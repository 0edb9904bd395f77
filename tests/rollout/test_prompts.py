"""A step's requests: uid layout, lengths from the workload, reproducibility, prompts from files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.rollout.prompts import encode_prompt, make_step_requests, max_prompt_tokens, max_response_tokens
from rlsim.rollout.types import RolloutRequest
from rlsim.workloads import FixedLengths, UniformLengths, WorkloadSpec


def test_groups_are_adjacent_and_share_their_prompt() -> None:
    reqs = make_step_requests(WorkloadSpec(seed=1), step=0, num_prompts=3, group_size=4)
    assert [r.uid for r in reqs] == list(range(12))
    assert [r.group for r in reqs] == [g for g in range(3) for _ in range(4)]
    for g in range(3):
        assert len({r.prompt for r in reqs if r.group == g}) == 1
    assert len({r.prompt for r in reqs}) == 3


def test_lengths_follow_the_workload_and_steps_are_reproducible() -> None:
    spec = WorkloadSpec(seed=2, response=UniformLengths(min=10, max=20))
    a = make_step_requests(spec, 5, 4, 4)
    assert all(10 <= r.response_tokens <= 20 for r in a)
    assert len({r.response_tokens for r in a}) > 1  # each sample draws its own length
    assert make_step_requests(spec, 5, 4, 4) == a
    assert make_step_requests(spec, 6, 4, 4) != a
    fixed = make_step_requests(WorkloadSpec(response=FixedLengths(tokens=9), prompt=FixedLengths(tokens=5)), 0, 2, 2)
    assert {r.response_tokens for r in fixed} == {9} and all(len(r.prompt.split()) == 5 for r in fixed)


def test_file_prompts_are_taken_in_order_and_wrap(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("alpha\nbeta\ngamma\n")
    spec = WorkloadSpec(path=path)
    assert [r.prompt for r in make_step_requests(spec, 0, 2, 2)][::2] == ["alpha", "beta"]
    assert [r.prompt for r in make_step_requests(spec, 1, 2, 2)][::2] == ["gamma", "alpha"]
    assert max_prompt_tokens(spec) is None


def test_length_maxima() -> None:
    spec = WorkloadSpec(prompt=FixedLengths(tokens=32), response=UniformLengths(min=1, max=99))
    assert (max_prompt_tokens(spec), max_response_tokens(spec)) == (32, 99)


class WordTokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [len(w) for w in text.split()]


def test_encode_prompt_checks_the_context() -> None:
    ok = encode_prompt(WordTokenizer(), RolloutRequest(0, 0, "a bb ccc", 5), max_model_len=8)
    assert ok == [1, 2, 3]
    with pytest.raises(RlsimError, match="max_model_len"):
        encode_prompt(WordTokenizer(), RolloutRequest(0, 0, "a bb ccc", 6), max_model_len=8)
    with pytest.raises(RlsimError, match="empty"):
        encode_prompt(WordTokenizer(), RolloutRequest(0, 0, "   ", 1), max_model_len=8)
