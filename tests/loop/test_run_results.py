"""The typed results.json: what the loop writes, the planner and --resume read back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.loop.config import RunConfig
from rlsim.loop.run import RunOutputs
from rlsim.planner.measure.loop_results import read_loop_steps, read_run_settings
from rlsim.run_results import RunResults, StepRecord

PHASES = ("generate", "score", "update", "sync", "idle", "total")


def step(n: int, generated_tokens: int) -> StepRecord:
    return StepRecord.model_validate(
        {
            "step": n,
            "schedule": "sequential",
            "time_s": {p: 1.0 for p in PHASES} | {"total": 5.0, "idle": 0.5},
            "rollouts": {"generated": 8, "scored": 8, "trained": 8},
            "cpu_s": {"rollout": 2.0, "driver": 0.1},
            "busy_s": {"rollout": 1.0},
            "tokens": {"prompt": 64, "generated": generated_tokens},
            "gpu_s": {},
            "overhead_fraction": 0.1,
            "busiest_actor_gap_fraction": 0.8,
            "sync": {"method": "simulated", "seconds": 1.0, "detail": ""},
            "train": {"sequences": 8},
        }
    )


def test_what_the_loop_writes_the_planner_reads(tmp_path: Path) -> None:
    outputs = RunOutputs(tmp_path, RunConfig.model_validate({"workload": {"prompts_per_step": 2, "group_size": 4}}))
    placement = {"cores": [0], "threads": 1, "gpu": 0.0, "num_cpus": 0.5}
    outputs.update(
        startup_s={"actors": 30.0},
        placement={r: placement for r in ("rollout", "scorer", "trainer")},
        actors=[],
        ray_nodes=1,
        environment={"cpus": 2},
    )
    for n, tokens in enumerate([100, 300, 500], start=1):
        outputs.add_step(step(n, tokens), [])
    written = json.loads((tmp_path / "results.json").read_text())
    assert list(written) == [
        "rlsim_version",
        "config",
        "complete",
        "steps",
        "overhead_fraction",
        "faults",
        "startup_s",
        "placement",
        "actors",
        "ray_nodes",
        "environment",
        "overhead_fraction_after_step1",
    ]
    assert written["overhead_fraction"] == 0.1 and written["placement"]["rollout"] == placement
    steps = read_loop_steps(tmp_path / "results.json")  # skips step 1 as warm-up
    assert steps.numbers == [2, 3] and list(steps.tokens) == [300.0, 500.0]  # type: ignore[arg-type]
    assert list(steps.time_s["idle"]) == [0.5, 0.5]
    settings = read_run_settings(tmp_path / "results.json")
    assert (settings.rollouts_per_step, settings.rollout_units, settings.trainer_units) == (8, 1.0, 1.0)


def test_a_file_read_and_written_back_keeps_its_keys(tmp_path: Path) -> None:
    # A partial file (no placement: the run stopped before its actors started) with a key a newer rlsim added.
    data = {
        "config": {"steps": 2},
        "complete": False,
        "steps": [step(1, 10).model_dump(mode="json")],
        "overhead_fraction": 0.1,
        "future_key": {"x": 1},
    }
    assert RunResults.parse(data, "f").dump() == data


def test_a_file_that_is_not_a_run_says_what_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"steps": [{"step": 1, "time_s": {"generate": 1.0}, "rollouts": {"generated": 2}}]}))
    with pytest.raises(RlsimError, match=r"steps\[0\] lacks time_s.score; .*it must be the results.json"):
        RunResults.read(path)
    path.write_text(json.dumps({"runtimes": {}}))
    with pytest.raises(RlsimError, match="the file lacks steps"):
        RunResults.read(path)
    path.write_text("[1, 2]")
    with pytest.raises(RlsimError, match="the file: Input should be a valid dictionary"):
        RunResults.read(path)
    with pytest.raises(RlsimError, match="does not exist"):
        RunResults.read(tmp_path / "none.json")


def test_resume_takes_over_the_steps_of_the_stored_file(tmp_path: Path) -> None:
    config = RunConfig(steps=4)
    first = RunOutputs(tmp_path, config)
    first.add_step(step(1, 10), [])
    first.update(faults={"injected": 1, "survived": 1})
    resumed = RunOutputs(tmp_path, config, resume=True)
    assert resumed.next_step == 2 and isinstance(resumed.results.steps[0], StepRecord)
    assert resumed.results.faults_before_resume == {"injected": 1, "survived": 1}
    assert json.loads((tmp_path / "results.json").read_text())["resumed_at_step"] == 2
