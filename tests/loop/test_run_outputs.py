"""run_loop around a session: a failed step leaves completed steps on disk and says how to resume;
``--resume`` continues after the last completed step of the same config. A fake session stands in
for the actors (the real one is exercised in test_loop_ray.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.loop.config import RunConfig
from rlsim.loop.run import RunOutputs, _faults_from, run_loop
from rlsim.run_results import StepRecord


def record(step: int) -> StepRecord:
    return StepRecord.model_validate(
        {
            "step": step,
            "schedule": "sequential",
            "time_s": {"generate": 1.0, "score": 1.0, "update": 1.0, "sync": 0.1, "idle": 0.1, "total": 3.3},
            "rollouts": {"generated": 4, "scored": 4, "trained": 4},
            "cpu_s": {"rollout": 1.0},
            "tokens": {"prompt": 8, "generated": 40},
            "overhead_fraction": 0.03,
            "sync": {"method": "simulated", "seconds": 0.1, "detail": ""},
        }
    )


class FakeSession:
    """Completes steps until ``fail_at``, where it raises like a dead rollout actor does."""

    def __init__(self, config: RunConfig, fail_at: int | None = None) -> None:
        self.config, self.fail_at, self.startup_s, self.backend = config, fail_at, {"actors": 1.0}, None
        self.ran: list[int] = []

    def describe(self) -> dict:
        return {"actors": []}

    def step(self, step: int, schedule=None, progress=None):
        if step == self.fail_at:
            raise RlsimError("the rollout actor died: killed")
        self.ran.append(step)
        return record(step), [
            {"step": step, "actor": "rollout", "phase": "generate", "batch": 0, "start": 0.0, "end": 1.0}
        ]


def test_a_failed_step_keeps_the_completed_ones_and_names_the_resume_command(tmp_path: Path) -> None:
    config = RunConfig(steps=4)
    with pytest.raises(RlsimError) as err:
        run_loop(
            config, tmp_path, show_progress=False, session=FakeSession(config, fail_at=3), resume_hint="RESUME-CMD"
        )
    assert "step 3 failed" in str(err.value) and "steps 1..2 are saved" in str(err.value)
    assert "RESUME-CMD" in str(err.value)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [s["step"] for s in saved["steps"]] == [1, 2] and saved["complete"] is False
    assert (tmp_path / "gantt.png").exists()  # figures are drawn even when the run stops early


def test_resume_continues_after_the_last_completed_step(tmp_path: Path) -> None:
    config = RunConfig(steps=4)
    with pytest.raises(RlsimError):
        run_loop(config, tmp_path, show_progress=False, session=FakeSession(config, fail_at=3))
    session = FakeSession(config)
    results = run_loop(config, tmp_path, show_progress=False, session=session, resume=True)
    assert session.ran == [3, 4]
    assert [s.step for s in results.steps] == [1, 2, 3, 4] and results.complete is True
    assert results.resumed_at_step == 3
    events = json.loads((tmp_path / "timeline.json").read_text())["events"]
    assert sorted({e["step"] for e in events}) == [1, 2, 3, 4]


def test_resume_refuses_another_config_or_a_missing_run(tmp_path: Path) -> None:
    with pytest.raises(RlsimError, match="does not exist"):
        RunOutputs(tmp_path / "none", RunConfig(), resume=True)
    RunOutputs(tmp_path, RunConfig(seed=1))
    with pytest.raises(RlsimError, match="seed differ"):
        RunOutputs(tmp_path, RunConfig(seed=2), resume=True)
    assert RunOutputs(tmp_path, RunConfig(seed=1, steps=9), resume=True).next_step == 1  # steps may change


def test_faults_already_injected_are_not_injected_again_on_resume() -> None:
    config = RunConfig.model_validate({"faults": {"kill_scorer_steps": [1, 3, 5], "kill_rollout_step": 3}})
    kept = _faults_from(config, first=3).faults
    assert kept.kill_scorer_steps == [5] and kept.kill_rollout_step is None
    http = RunConfig.model_validate(
        {"reward": {"runtime": "http"}, "faults": {"kill_http_server_steps": [2, 4], "stall_http_server_steps": [3, 5]}}
    )
    kept = _faults_from(http, first=3).faults
    assert kept.kill_http_server_steps == [4] and kept.stall_http_server_steps == [5]
