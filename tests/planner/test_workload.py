"""The simulator draws token lengths with the real loop's distributions (``rlsim.workloads``)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from rlsim.planner.spec.workload import Workload
from rlsim.workloads import FixedLengths, LognormalLengths, UniformLengths, WorkloadSpec


def test_response_draws_are_the_loops_draws() -> None:
    # Fixed prompts consume no random numbers, so the responses come first off the (seed, step)
    # stream; the loop's class on that stream must give the very same lengths.
    dist = UniformLengths(min=3, max=40)
    workload = Workload(prompts_per_step=5, group_size=3, prompt_tokens=FixedLengths(tokens=7), response_tokens=dist)
    prompts, responses = workload.sample_step(seed=11, step=2)
    assert prompts.tolist() == [7] * 15
    expected = UniformLengths(min=3, max=40).sample(np.random.default_rng([11, 2]), 15)
    assert responses.dtype == np.int64 and responses.tolist() == expected.tolist()


def test_a_loop_workload_spec_carries_over_unchanged() -> None:
    # A loop config's distributions are accepted as they are: no conversion that could round differently.
    spec = WorkloadSpec(prompt=FixedLengths(tokens=32), response=LognormalLengths(mean=100, sigma=0.8, min=4, max=300))
    workload = Workload(prompts_per_step=2, group_size=2, prompt_tokens=spec.prompt, response_tokens=spec.response)
    assert workload.response_tokens is spec.response
    _, responses = workload.sample_step(seed=0, step=1)
    rng = np.random.default_rng([0, 1])
    assert responses.tolist() == spec.response.sample(rng, 4).tolist()


def test_yaml_form_is_the_loops_form() -> None:
    workload = Workload.model_validate(
        {
            "prompts_per_step": 1,
            "prompt_tokens": {"kind": "fixed", "tokens": 9},
            "response_tokens": {"kind": "uniform", "min": 1, "max": 2},
        }
    )
    assert isinstance(workload.prompt_tokens, FixedLengths) and isinstance(workload.response_tokens, UniformLengths)
    with pytest.raises(ValidationError, match="mean"):  # the planner's old spelling of a fixed length
        Workload.model_validate({"prompts_per_step": 1, "response_tokens": {"kind": "fixed", "mean": 9}})


def test_lognormal_mean_above_its_max_is_refused() -> None:
    # max defaults to 512: a 2,000-token mean would otherwise become "always 512" without a word.
    with pytest.raises(ValidationError, match="mean 2000 is above max 512"):
        Workload(prompts_per_step=1, response_tokens=LognormalLengths(mean=2000))
    assert Workload(prompts_per_step=1, response_tokens=LognormalLengths(mean=2000, max=8192))
