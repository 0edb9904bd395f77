"""What an async run records: step records with versions and staleness, the run-wide ``async`` and
``rollouts_total`` records in ``results.json``, the report lines and the whole-run Gantt chart."""

from __future__ import annotations

from pathlib import Path

from rlsim.loop.outputs.asynchronous import async_markdown, async_step_record, async_summary
from rlsim.loop.outputs.report import write_async_figures
from rlsim.loop.schedules.asynchronous.pipeline import AsyncSettings
from rlsim.run_results import RunResults
from tests.loop.test_async_schedule import TimedGenerator, TimedStage, TimedTrainer, run


def test_records_of_a_one_step_off_policy_run(tmp_path: Path) -> None:
    s = AsyncSettings(2, 2, max_staleness=1, queue_size=8, steps=3, micro_batch=4)
    pipeline, outcomes = run(TimedGenerator([0.05]), [TimedStage([0.01])], TimedTrainer([0.1]), s)
    assert pipeline.start is not None
    records, rows = [], []
    for k, o in enumerate(outcomes, start=1):
        rec, r = async_step_record(k, o, {}, pipeline.start)
        records.append(rec)
        rows += r
    assert [r.policy_version for r in records] == [1, 2, 3]
    assert [r.staleness for r in records] == [{"0": 4}, {"1": 4}, {"1": 4}]
    assert [r.rollouts.trained for r in records] == [4, 4, 4] and sum(r.rollouts.generated for r in records) == 12
    assert all(r.schedule == "async" and r.dropped_stale == 0 for r in records)

    summary = async_summary(pipeline, outcomes[-1].end)
    results = RunResults(steps=records, config={"schedule": "async"})
    for key, value in summary.items():
        setattr(results, key, value)
    data = results.dump()
    a = data["async"]
    assert a["max_staleness"] == 1 and a["staleness_histogram"] == {"0": 4, "1": 8}
    assert data["rollouts_total"] == {"generated": 12, "trained": 12, "dropped_stale": 0, "unfinished_at_end": 0}
    # The trainer sleeps 3 x 100 ms and waits for the first batch's 50 ms of generation; the rollout worker sleeps
    # 3 x 50 ms and waits through the last two updates. Read as busy seconds, not as fractions of a wall time a
    # loaded host stretches (a CI run under load once made the wall 1 s and the trainer 71% idle).
    busy = {role: (1 - a[f"{role}_idle_fraction"]) * a["wall_s"] for role in ("trainer", "rollout")}
    assert busy["trainer"] >= 0.3 - 1e-3 and busy["rollout"] >= 0.15 - 1e-3
    assert a["trainer_idle_fraction"] > 0.0 and a["rollout_idle_fraction"] > 0.0
    assert abs(a["rollouts_trained_per_hour"] / (12 / a["wall_s"] * 3600) - 1) < 1e-3  # wall_s is rounded
    assert a["queue_length"][0][1] >= 0 and max(n for _, n in a["queue_length"]) >= 4
    again = RunResults.parse(data, "results.json")
    assert again.async_ is not None and again.rollouts_total is not None and again.rollouts_total.trained == 12

    text = "\n".join(async_markdown(again))
    assert "4 at staleness 0, 8 at staleness 1" in text and "12 generated = 12 trained + 0 dropped" in text
    assert write_async_figures(tmp_path, rows) == ["async_gantt.png"]
    assert (tmp_path / "async_gantt.png").read_bytes()[:4] == b"\x89PNG"
    # Labels: generate events carry their batch number, updates theirs.
    assert sorted(r["batch"] for r in rows if r["phase"] == "generate") == [0, 1, 2]
    assert sorted(r["batch"] for r in rows if r["phase"] == "update") == [0, 1, 2]
