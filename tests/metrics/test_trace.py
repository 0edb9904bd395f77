"""trace.json is valid Trace Event Format: X events with ts/dur in microseconds, M events naming one
process track per actor, overlapping spans of one actor on separate lanes."""

from __future__ import annotations

import json
from pathlib import Path

from rlsim.loop.config import RunConfig
from rlsim.loop.run import run_loop
from rlsim.metrics.trace import run_trace, trace_events, validate_trace
from rlsim.run_results import StepRecord

STEPS = [{"step": 1, "time_s": {"total": 2.0}}, {"step": 2, "time_s": {"total": 3.0}}]
ROWS = [
    {"step": 1, "actor": "rollout", "phase": "generate", "batch": 0, "start": 0.0, "end": 1.0, "items": 4},
    {"step": 1, "actor": "scorer-0", "phase": "score", "batch": 0, "start": 0.5, "end": 1.25},
    {"step": 1, "actor": "scorer-0", "phase": "score", "batch": 1, "start": 1.0, "end": 1.5},  # overlaps batch 0
    {"step": 2, "actor": "trainer", "phase": "update", "batch": 0, "start": 0.25, "end": 2.0},
    {"step": 3, "actor": "trainer", "phase": "update", "batch": 0, "start": 0.0, "end": 1.0},  # step never finished
]


def test_run_trace_is_valid_with_one_named_track_per_actor() -> None:
    doc = json.loads(json.dumps(run_trace(ROWS, STEPS)))  # what a viewer reads back
    assert validate_trace(doc) == []
    events = doc["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(processes.values()) == ["rollout", "scorer-0", "steps", "trainer"]
    spans = [e for e in events if e["ph"] == "X"]
    update = next(e for e in spans if e["name"] == "update")
    # step 2 starts where step 1 (2.0 s) ended: 2.25 s = 2,250,000 us, lasting 1.75 s.
    assert update["ts"] == 2_250_000 and update["dur"] == 1_750_000
    assert processes[update["pid"]] == "trainer"
    score = sorted((e for e in spans if e["name"] == "score"), key=lambda e: e["ts"])
    assert score[0]["pid"] == score[1]["pid"] and score[0]["tid"] != score[1]["tid"]
    assert len([e for e in spans if e["cat"] == "step"]) == 2 and len(spans) == 2 + 4


def test_validator_catches_what_viewers_reject() -> None:
    good = trace_events([{"track": "a", "name": "x", "start": 0.0, "end": 1.0}])
    assert validate_trace({"traceEvents": good}) == []
    bad_dur = [dict(e, dur=-1) if e["ph"] == "X" else e for e in good]
    assert any("dur" in p for p in validate_trace({"traceEvents": bad_dur}))
    unnamed = [e for e in good if e["ph"] == "X"]
    assert any("process_name" in p for p in validate_trace({"traceEvents": unnamed}))
    assert validate_trace({"events": []}) == ["traceEvents is missing or not a list"]
    assert any("ph" in p for p in validate_trace({"traceEvents": [{"ph": "B", "name": "x", "pid": 1, "tid": 0}]}))


class TwoActorSession:
    def __init__(self, config: RunConfig) -> None:
        self.config, self.startup_s, self.backend = config, {}, None

    def describe(self) -> dict:
        return {"actors": []}

    def step(self, step: int, schedule=None, progress=None):
        record = {
            "step": step,
            "schedule": "sequential",
            "time_s": {"generate": 1.0, "score": 0.5, "update": 0.0, "sync": 0.0, "idle": 0.0, "total": 1.5},
            "rollouts": {"generated": 2, "scored": 2, "trained": 2},
            "cpu_s": {},
            "tokens": {"prompt": 4, "generated": 8},
            "overhead_fraction": 0.0,
            "sync": {"method": "simulated", "seconds": 0.0, "detail": ""},
        }
        rows = [
            {"step": step, "actor": "rollout", "phase": "generate", "batch": 0, "start": 0.0, "end": 1.0},
            {"step": step, "actor": "scorer-0", "phase": "score", "batch": 0, "start": 1.0, "end": 1.5},
        ]
        return StepRecord.model_validate(record), rows


def test_run_loop_writes_trace_json(tmp_path: Path) -> None:
    config = RunConfig(steps=2)
    run_loop(config, tmp_path, show_progress=False, session=TwoActorSession(config))
    doc = json.loads((tmp_path / "trace.json").read_text())
    assert validate_trace(doc) == []
    assert len([e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "score"]) == 2
