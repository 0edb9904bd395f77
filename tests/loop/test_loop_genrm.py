"""The real loop with a generative judge as the reward: Ray + vLLM (the policy's engine, the real-loop tests'
shared one, tests/loop/conftest.py) + the ``genrm`` runtime, whose judge (tiny-llama) runs on a vLLM engine of
its own inside the scoring actor, on the same cores as the policy's engine: with the sequential schedule the two
take turns (the judge works after generation), with the overlapped one they contend.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.loop.config import RunConfig
from tests.helpers.tiny_run import tiny_vllm_run

pytestmark = pytest.mark.slow

CONFIG = tiny_vllm_run(
    steps=1,  # a step under each schedule: the subject is the judge's part in it
    reward={
        "runtime": "genrm",
        "batch_size": 4,
        "engine_process": "inline",  # the judge's engine in the scoring actor's process, as the policy's
        "genrm": {"judge": "tiny-llama", "mode": "verdict", "max_model_len": 256},
    },
)


@pytest.fixture(scope="module")
def session(borrowing):
    with borrowing(CONFIG) as s:
        yield s


def test_the_judge_scores_every_rollout_under_both_schedules(session, tmp_path: Path) -> None:
    from rlsim.loop.run import run_loop

    run_loop(RunConfig.model_validate({**CONFIG, "schedule": "sequential"}), tmp_path / "seq", show_progress=False,
             session=session)  # fmt: skip
    sequential = json.loads((tmp_path / "seq" / "results.json").read_text())["steps"]
    run_loop(RunConfig.model_validate({**CONFIG, "schedule": "overlapped"}), tmp_path / "ovl", show_progress=False,
             session=session)  # fmt: skip
    overlapped = json.loads((tmp_path / "ovl" / "results.json").read_text())["steps"]
    assert len(sequential) == len(overlapped) == 1
    for step in sequential + overlapped:
        assert step["rollouts"] == {"generated": 8, "scored": 8, "trained": 8}
        assert step["reward_outcomes"]["judge_prompt_tokens"] > step["tokens"]["generated"]  # template + response
        assert step["time_s"]["score"] > 0 and step["cpu_s"]["scorer-0"] > 0
        assert step["train"]["grad_norm"] > 0  # the judge's rewards differ within a group: there is a gradient
    assert all(s["schedule"] == "sequential" for s in sequential)
    assert all(s["schedule"] == "overlapped" for s in overlapped)
