"""The real loop: Ray (two-node cluster) + vLLM + the GRPO trainer, on the tiny models, scored by two replicas of
the ``vllm`` runtime (each scoring actor holds a pooling engine of tiny-llama-rm: the path the frameworks serve
reward models on; the eager runtime runs in the other loop tests).

One session of actors runs a sequential and an overlapped step, then ``run_loop`` writes the output files. Actors
are spread over both nodes. The policy's engine is the real-loop tests' shared one (tests/loop/conftest.py,
borrowed: it loads this session's trainer's weights at start); the session starts its own scorers and trainer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.loop.config import RunConfig
from rlsim.run_results import StepRecord
from tests.helpers.tiny_run import tiny_vllm_run

pytestmark = pytest.mark.slow

CONFIG = tiny_vllm_run(
    reward={
        "runtime": "vllm",
        "model": "tiny-llama-rm",
        "replicas": 2,
        "batch_size": 4,
        "max_length": 128,
        "engine_process": "inline",  # each scorer's pooling engine inside its actor, as the policy's (tiny_run)
    }
)


@pytest.fixture(scope="module")
def session(borrowing):
    with borrowing(CONFIG) as s:
        yield s


def check_record(record: StepRecord, schedule: str) -> None:
    from rlsim.rollout.prompts import make_step_requests

    rec = record.model_dump(mode="json")  # as results.json holds it

    cfg = RunConfig.model_validate(CONFIG)
    asked = make_step_requests(cfg.workload.spec, rec["step"], 4, 2)
    assert rec["schedule"] == schedule
    assert rec["rollouts"] == {"generated": 8, "scored": 8, "trained": 8}
    assert rec["tokens"]["generated"] == sum(r.response_tokens for r in asked)
    t = rec["time_s"]
    assert all(t[p] > 0 for p in ("generate", "score", "update", "sync", "total"))
    assert t["idle"] >= 0 and t["total"] >= max(t["generate"], t["update"])
    # Every actor did work (vLLM's engines run inside their actors here; a separate engine's processes count
    # towards their actor's tree: tests/experiment/test_accounting.py).
    assert set(rec["cpu_s"]) == {"rollout", "scorer-0", "scorer-1", "trainer", "driver"}
    assert all(rec["cpu_s"][a] > 0 for a in ("rollout", "scorer-0", "scorer-1", "trainer"))
    assert rec["sync"]["method"] == "vllm-reload"
    replicas = rec["scoring_replicas"]  # the router's figures: every rollout scored once, on two replicas
    assert [r["replica"] for r in replicas] == [0, 1] and sum(r["rollouts"] for r in replicas) == 8
    assert all(r["calls"] >= 1 and r["max_queue_depth"] >= 1 for r in replicas)
    assert rec["train"]["sequences"] == 8 and rec["train"]["grad_norm"] > 0


def test_actors_are_spread_over_both_nodes(session) -> None:
    nodes = {a["node"] for a in session.describe()["actors"]}
    assert len(nodes) == 2
    assert session.describe()["ray_nodes"] == 2


def test_sequential_step(session) -> None:
    rec, rows = session.step(1, "sequential")
    check_record(rec, "sequential")
    gen = [r for r in rows if r["phase"] == "generate"]
    first_score = min(r["start"] for r in rows if r["phase"] == "score")
    assert len(gen) == 1 and first_score >= gen[0]["end"]  # scoring waits for all generation


def test_overlapped_step_scores_while_generating(session) -> None:
    rec, rows = session.step(2, "overlapped")
    check_record(rec, "overlapped")
    gen_end = max(r["end"] for r in rows if r["phase"] == "generate")
    first_score = min(r["start"] for r in rows if r["phase"] == "score")
    assert len([r for r in rows if r["phase"] == "score"]) == 4  # 8 rollouts in micro-batches of 2
    assert first_score < gen_end  # the first micro-batch was scored while later ones were generated


def test_run_loop_writes_every_output(session, tmp_path: Path) -> None:
    from rlsim.loop.run import run_loop

    results = run_loop(session.config, tmp_path, show_progress=False, session=session)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["complete"] is True and len(saved["steps"]) == 2 == len(results.steps)
    assert 0 <= saved["overhead_fraction"] < 1
    for step in saved["steps"]:
        assert set(step["time_s"]) >= {"generate", "score", "update", "sync", "idle", "total"}
        assert step["rollouts"]["generated"] == step["rollouts"]["scored"] == step["rollouts"]["trained"] == 8
    events = json.loads((tmp_path / "timeline.json").read_text())["events"]
    assert {e["step"] for e in events} == {1, 2}
    assert {"actor", "phase", "batch", "start", "end", "cores"} <= set(events[0])
    assert (tmp_path / "gantt.png").read_bytes().startswith(b"\x89PNG")
    assert "gantt.png" in (tmp_path / "report.md").read_text()
