"""The real loop with rewards that are no model: Ray + vLLM (the real-loop tests' shared engine,
tests/loop/conftest.py), scored by ``sandbox`` (bank programs run in real namespaces) and by ``function`` (a stdlib
function in a worker pool that fails on purpose: each failure counted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.loop.config import RunConfig
from tests.helpers.tiny_run import tiny_vllm_run

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")

CONFIG = tiny_vllm_run(steps=1, reward={"runtime": "sandbox", "batch_size": 4, "sandbox": {"workers": 2}})
CONFIG["workload"]["prompts_per_step"] = 2  # 4 rollouts a step


@pytest.mark.parametrize(
    "reward, counted",
    [
        ({"runtime": "sandbox", "sandbox": {"workers": 2}}, {"bank_programs": 4, "programs_run": 4}),
        # operator.pow(prompt, response) raises TypeError on every call: each is an error given the default reward
        ({"runtime": "function", "function": {"target": "operator:pow", "on_error": "default"}}, {"errors": 4}),
    ],
)
def test_rewards_that_are_no_model_score_every_rollout_in_the_loop(borrowing, tmp_path: Path, reward, counted):
    from rlsim.loop.run import run_loop

    config = {**CONFIG, "reward": {**CONFIG["reward"], **reward}}
    with borrowing(config) as session:
        run_loop(RunConfig.model_validate(config), tmp_path, show_progress=False, session=session)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["complete"] is True and len(saved["steps"]) == 1
    for step in saved["steps"]:
        assert step["rollouts"] == {"generated": 4, "scored": 4, "trained": 4}
        assert {k: step["reward_outcomes"][k] for k in counted} == counted
