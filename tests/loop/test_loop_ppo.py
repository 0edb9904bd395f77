"""The real PPO loop: Ray + vLLM + the eager scorer + the reference (ORT graph) + the critic + the trainer.

One session runs a sequential and an overlapped step, then ``run_loop`` writes the output files; its policy
engine is the real-loop tests' shared one (tests/loop/conftest.py, borrowed). The critic is colocated with the
trainer (one process, taking turns); the reference has an actor of its own, so both kinds of placement are
exercised.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.loop.config import RunConfig, cross_field_problems
from rlsim.loop.schedules.ppo import EXPERIENCE_PHASES
from rlsim.run_results import StepRecord
from tests.helpers.tiny_run import tiny_vllm_run

pytestmark = pytest.mark.slow

CONFIG = tiny_vllm_run(
    trainer={"algorithm": "ppo", "micro_batch": 4, "sync": "reload"},
    kl={"coef": 0.05, "estimator": "k3", "target": "reward"},
    reference={"runtime": "ort", "micro_batch": 4},
    critic={"micro_batch": 4},
    placement={
        "preset": "shared",
        "colocate": [["critic", "trainer"]],
        "rollout": {"num_cpus": 0.25},
        "scorer": {"num_cpus": 0.25},
        "trainer": {"num_cpus": 0.25},
        "reference": {"num_cpus": 0.25},
        "critic": {"num_cpus": 0.25},
    },
)
ACTORS = {"rollout", "scorer-0", "critic+trainer", "reference"}


@pytest.fixture(scope="module")
def session(borrowing):
    assert cross_field_problems(RunConfig.model_validate(CONFIG)) == []
    with borrowing(CONFIG) as s:
        yield s


def check_record(record: StepRecord, schedule: str) -> None:
    from rlsim.rollout.prompts import make_step_requests

    rec = record.model_dump(mode="json")
    asked = make_step_requests(RunConfig.model_validate(CONFIG).workload.spec, rec["step"], 4, 2)
    assert rec["schedule"] == schedule
    assert rec["rollouts"] == {"generated": 8, "scored": 8, "trained": 8, "referenced": 8, "valued": 8}
    assert rec["tokens"]["generated"] == sum(r.response_tokens for r in asked)
    t = rec["time_s"]
    assert all(t[p] > 0 for p in ("generate", "score", "update", "sync", "total", *EXPERIENCE_PHASES))
    assert t["update"] >= max(t["advantages"], t["update_actor"], t["update_critic"])
    assert set(rec["cpu_s"]) == ACTORS | {"driver"}
    assert all(rec["cpu_s"][a] > 0 for a in ACTORS)
    assert rec["busy_s"].keys() >= {"rollout", "scorer-0", "reference", "critic", "trainer"}
    assert rec["sync"]["method"] == "vllm-reload"
    train = rec["train"]
    assert train["algorithm"] == "ppo" and train["sequences"] == 8 and train["grad_norm"] > 0
    assert train["value_loss"] > 0 and train["kl"] >= 0 and train["entropy"] > 0
    assert train["policy_loss"] is not None


def test_the_five_roles_run_in_four_processes(session) -> None:
    info = session.describe()
    assert {a["name"] for a in info["actors"]} == ACTORS
    assert set(info["placement"]) == {"rollout", "scorer", "trainer", "reference", "critic"}


def test_sequential_ppo_step(session) -> None:
    rec, rows = session.step(1, "sequential")
    check_record(rec, "sequential")
    gen_end = max(r["end"] for r in rows if r["phase"] == "generate")
    experience = [r for r in rows if r["phase"] in ("score", "reference", "values")]
    assert min(r["start"] for r in experience) >= gen_end
    # Advantages wait for every score, log-prob and value; both updates wait for the advantages.
    adv = next(r for r in rows if r["phase"] == "advantages")
    assert adv["start"] >= max(r["end"] for r in experience)
    assert all(r["start"] >= adv["end"] for r in rows if r["phase"] in ("update_actor", "update_critic"))


def test_overlapped_ppo_step_sends_micro_batches_to_all_three_while_generating(session) -> None:
    rec, rows = session.step(2, "overlapped")
    check_record(rec, "overlapped")
    gen_end = max(r["end"] for r in rows if r["phase"] == "generate")
    for phase in ("score", "reference", "values"):
        batches = [r for r in rows if r["phase"] == phase]
        assert len(batches) == 4, phase  # 8 rollouts in micro-batches of 2
    assert min(r["start"] for r in rows if r["phase"] in ("score", "reference", "values")) < gen_end


def test_run_loop_writes_the_ppo_results(session, tmp_path: Path) -> None:
    from rlsim.loop.run import run_loop

    run_loop(session.config, tmp_path, show_progress=False, session=session)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["algorithm"] == "ppo" and saved["complete"] is True and len(saved["steps"]) == 2
    for step in saved["steps"]:
        r = step["rollouts"]
        assert r["generated"] == r["scored"] == r["referenced"] == r["valued"] == r["trained"] == 8
    assert (tmp_path / "gantt.png").read_bytes().startswith(b"\x89PNG")
    assert "The experience roles" in (tmp_path / "report.md").read_text()
