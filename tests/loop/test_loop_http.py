"""The real loop with ``reward.runtime: http``: Ray + HF generation + an ``rlsim serve`` process per scorer,
or a remote server (a scripted one on loopback) that leaves a request unanswered.

HF ``generate`` instead of vLLM keeps this cheap (no engine start): the subject is scoring. Step 1
runs plain, step 2 kills scorer-0's server (survived: a new server scores the batch again), step 3
freezes it past the client's deadline (the run stops with the deadline error and how to resume;
steps 1-2 stay on disk and the fault counts say 2 injected, 1 survived).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.loop.config import RunConfig
from tests.helpers.scripted_server import RewardServerHandler, read_json, scripted_server, send_json
from tests.helpers.tiny_run import tiny_hf_run

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")

CONFIG = tiny_hf_run(
    steps=3,
    reward={"runtime": "http", "server_runtime": "eager", "batch_size": 4, "max_length": 64, "http_deadline_s": 5},
    faults={"kill_http_server_steps": [2], "stall_http_server_steps": [3]},
)


def test_http_scoring_in_the_loop_survives_a_killed_server_and_stops_clearly_on_a_stalled_one(
    ray_cluster, tmp_path: Path
) -> None:
    from rlsim.loop.driver import LoopSession
    from rlsim.loop.run import run_loop

    config = RunConfig.model_validate(CONFIG)
    session = LoopSession(config)
    try:
        session.start()
        scorer = session.actors.scorers[0]
        assert [a["runtime"] for a in session.describe()["actors"] if a["name"] == "scorer-0"] == ["http"]
        first_server = ray.get(scorer.server_pid.remote())
        with pytest.raises(RlsimError) as failed:
            run_loop(config, tmp_path, show_progress=False, session=session)
        # The stalled batch failed after the client's deadline, not after some distant step timeout.
        assert "step 3 failed: the scoring server at http://127.0.0.1:" in str(failed.value)
        assert "within 5 s" in str(failed.value) and "reward.http_deadline_s" in str(failed.value)
        assert "steps 1..2 are saved" in str(failed.value) and "--resume" in str(failed.value)
        assert ray.get(scorer.server_pid.remote()) not in (None, first_server)  # step 2 replaced the server
    finally:
        session.close()
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["complete"] is False and [s["step"] for s in saved["steps"]] == [1, 2]
    for step in saved["steps"]:  # step 1 plain, step 2 despite the killed server: every rollout scored once
        assert step["rollouts"] == {"generated": 4, "scored": 4, "trained": 4}
    assert (saved["faults"]["injected"], saved["faults"]["survived"]) == (2, 1)


class _StallFirst(RewardServerHandler):
    """rlsim's protocol on loopback, reward 1.0; the first POST it gets sleeps past the client's timeout."""

    posts = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        texts = read_json(self)["texts"]
        with self.lock:
            type(self).posts += 1
            first = type(self).posts == 1
        if first:
            time.sleep(3.0)
        send_json(self, 200, {"rewards": [1.0] * len(texts), "truncated": 0})


def test_a_remote_reward_past_its_timeout_drops_its_group_and_every_count_adds_up(ray_cluster, tmp_path: Path):
    """A remote server (here a scripted one) leaves the first request unanswered past ``timeout_s``: with
    ``on_timeout: drop`` and no retry, that rollout's group (2 of the step's 4) is left out of step 1's update."""
    from rlsim.loop.run import run_loop

    remote = {"request_size": 1, "concurrency": 2, "timeout_s": 1.0, "retries": 0, "on_timeout": "drop"}
    with scripted_server(_StallFirst) as url:
        config = RunConfig.model_validate(
            tiny_hf_run(
                schedule="sequential",
                warmup=False,  # the first request is then step 1's
                reward={"runtime": "http", "url": url, "batch_size": 4, "http": remote},
            )
        )
        run_loop(config, tmp_path, show_progress=False)
    saved = json.loads((tmp_path / "results.json").read_text())
    first, second = saved["steps"]
    assert first["rollouts"] == {"generated": 4, "scored": 4, "trained": 2, "dropped": 2}
    assert first["reward_outcomes"] == {"dropped": 1, "timeouts": 1}
    assert second["rollouts"] == {"generated": 4, "scored": 4, "trained": 4} and "reward_outcomes" not in second
    assert _StallFirst.posts == 8  # one request per rollout, none retried
