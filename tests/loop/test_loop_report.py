"""report.md text and the PNG figures, from a small synthetic results object."""

from __future__ import annotations

from pathlib import Path

from rlsim.loop.config import RunConfig
from rlsim.loop.outputs.report import breakdown_png, gantt_png, render_markdown, write_figures
from rlsim.loop.run import RunOutputs, summary_lines
from rlsim.run_results import RunResults, StepRecord

STEP = StepRecord.model_validate(
    {
        "step": 1,
        "schedule": "overlapped",
        "time_s": {"generate": 4.0, "score": 2.5, "update": 2.0, "sync": 0.6, "idle": 2.4, "total": 10.0},
        "rollouts": {"generated": 12, "scored": 12, "trained": 12},
        "cpu_s": {"rollout": 8.0, "scorer-0": 3.0, "trainer": 4.0, "driver": 0.1},
        "tokens": {"prompt": 48, "generated": 900},
        "overhead_fraction": 0.24,
        "sync": {"method": "vllm-reload", "seconds": 0.4, "detail": ""},
    }
)
ROWS = [
    {"step": 1, "actor": "rollout", "phase": "generate", "batch": 0, "start": 0.0, "end": 4.0},
    {"step": 1, "actor": "scorer-0", "phase": "score", "batch": 0, "start": 2.0, "end": 3.5},
    {"step": 1, "actor": "trainer", "phase": "update", "batch": 0, "start": 6.0, "end": 8.0},
]


def test_markdown_holds_the_step_table_and_cpu_table() -> None:
    results = RunResults(
        config=RunConfig().model_dump(mode="json"),
        steps=[STEP],
        overhead_fraction=0.24,
        complete=True,
        startup_s={"actors": 50.0},
    )
    text = render_markdown(results, ["gantt.png"])
    assert "| 1 | 10.00 | 4.00 | 2.50 | 2.00 | 0.60 | 2.400 | 24.0% | 12/12/12 | 900 | vllm-reload |" in text
    assert "| 1 | 0.10 | 8.00 | 3.00 | 4.00 |" in text  # driver, rollout, scorer-0, trainer (sorted)
    assert "![gantt.png](gantt.png)" in text and "1 of 3 steps done." in text


def test_figures_are_png_files(tmp_path: Path) -> None:
    assert gantt_png(ROWS, 1).startswith(b"\x89PNG")
    assert breakdown_png([STEP]).startswith(b"\x89PNG")
    names = write_figures(tmp_path, RunResults(steps=[STEP]), ROWS)
    assert names == ["gantt.png", "breakdown.png"] and all((tmp_path / n).stat().st_size > 1000 for n in names)
    assert write_figures(tmp_path, RunResults(steps=[]), []) == []


def test_outputs_are_rewritten_after_each_step(tmp_path: Path) -> None:
    import json

    outputs = RunOutputs(tmp_path, RunConfig())
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == []
    outputs.add_step(STEP, ROWS)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["steps"][0]["rollouts"]["trained"] == 12 and saved["overhead_fraction"] == 0.24
    assert len(json.loads((tmp_path / "timeline.json").read_text())["events"]) == 3
    assert "| 1 |" in (tmp_path / "report.md").read_text()
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files
    other = RunResults.model_validate({**saved, "config": {"schedule": "x"}})
    assert "12 rollouts generated = scored = trained" in summary_lines(other)[0]


def test_a_ppo_run_adds_the_experience_table_and_a_grpo_run_does_not() -> None:
    ppo = STEP.model_copy(deep=True)
    ppo.time_s.reference, ppo.time_s.values, ppo.time_s.advantages = 1.5, 1.25, 0.5
    ppo.time_s.update_actor, ppo.time_s.update_critic = 1.0, 0.75
    ppo.rollouts.referenced = ppo.rollouts.valued = 12
    ppo.train = {"policy_loss": -0.01, "value_loss": 0.5, "kl": 0.002}
    text = render_markdown(RunResults(config=RunConfig().model_dump(mode="json"), steps=[ppo]))
    assert "| 1 | 1.50 | 1.25 | 0.50 | 1.00 | 0.75 | 12 | 12 | -0.01 | 0.5 | 0.002 |" in text
    assert "experience roles" not in render_markdown(RunResults(steps=[STEP]))
    assert (
        "12 rollouts generated = scored = referenced = valued = trained"
        in summary_lines(RunResults(config={"schedule": "overlapped"}, steps=[ppo]))[0]
    )
    ppo_rows = ROWS + [{"step": 1, "actor": "reference", "phase": "reference", "batch": 0, "start": 2.0, "end": 3.0}]
    assert gantt_png(ppo_rows, 1).startswith(b"\x89PNG")


def test_a_planner_run_on_warm_actors_says_which_steps_it_ran() -> None:
    steps = [STEP.model_copy(update={"step": n}) for n in (2, 3)]
    base = {"config": RunConfig().model_dump(mode="json"), "steps": steps, "complete": True}
    text = render_markdown(RunResults(**base, warmup_steps=0))
    assert "3 of 3 steps done (steps 2-3: its warm-up steps were not run, the actors were warm)." in text
    assert "3 of 3 steps done." in render_markdown(RunResults(**{**base, "steps": [STEP, *steps]}))
