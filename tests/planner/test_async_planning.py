"""``schedule: async`` in the planner: evaluation from a profile, the search, ``rlsim plan``, and
``rlsim plan validate`` comparing rollouts trained per hour (with a fake loop runner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlsim.cli.main import main
from rlsim.planner.measure.loop_set import LoopCase, load_loop_set, resolve_cases
from rlsim.planner.profile.schema import save_profile
from rlsim.planner.search.grid import Candidates, enumerate_placements, run_search
from rlsim.planner.sim.evaluate import evaluate
from rlsim.planner.spec.cluster import BatcherSpec, NodeSpec, SearchSpec
from rlsim.planner.validate.compare import run_validation
from rlsim.planner.validate.predict import predict_step
from rlsim.run_results import RunResults
from tests.helpers.planner_cases import fixed_workload, make_profile, placement

ROOT = Path(__file__).resolve().parents[2]


def test_staleness_zero_takes_the_sequential_step(two_core_node: NodeSpec) -> None:
    # test_simulate's sequential step by hand: generate 4 s, score two batches of 0.5 s, update 0.3,
    # sync 0.2 = 5.5 s. Async with max_staleness 0 cannot run ahead: the same 5.5 s a step, all on-policy.
    profile, work = make_profile(max_running=1), fixed_workload()
    seq = evaluate(two_core_node, profile, work, placement("sequential"), steps=3)
    on_policy = evaluate(two_core_node, profile, work, placement("async", max_staleness=0, batcher_window=4), steps=3)
    assert seq.step_time_s == pytest.approx(5.5)
    assert on_policy.step_time_s == pytest.approx(5.5)
    assert on_policy.rollouts_per_hour == pytest.approx(seq.rollouts_per_hour)
    assert on_policy.extra["async"]["staleness_histogram"] == {"0": 12}


def test_one_step_of_lag_hides_scoring_and_the_update_behind_generation(two_core_node: NodeSpec) -> None:
    # max_staleness 1, split cores (no contention): the engine makes batch k+1 while batch k is scored
    # (1 s) and trained (0.3 s); each step after the first is the 4 s batch plus the 0.2 s weight load.
    ev = evaluate(
        two_core_node, make_profile(max_running=1), fixed_workload(), placement("async", batcher_window=4), steps=4
    )
    assert ev.step_time_s == pytest.approx(4.2)
    assert ev.rollouts_per_hour == pytest.approx(4 * 3600 / 4.2)
    a = ev.extra["async"]
    assert a["staleness_histogram"] == {"0": 4, "1": 12}
    assert a["rollouts_total"]["generated"] == a["rollouts_total"]["trained"] == 16
    assert ev.bottleneck == "generation"
    assert ev.as_dict()["async"]["max_staleness"] == 1  # the plan JSON carries it


def test_with_roles_the_trainer_shares_the_scorers_core_at_the_measured_efficiency(two_core_node: NodeSpec) -> None:
    # Trainer on the scorer's core: generation 1 s per batch (core 0); scoring (2 calls of 0.5 s) and the
    # update (0.3 s) share core 1, the bottleneck. With a roles section the pair runs at efficiency x 1/2
    # each while both are busy; at efficiency 1 core 1 does its 1.3 s of work per step without loss.
    from tests.helpers.planner_cases import roles_profile

    spec = placement("async", batcher_window=4, train_on="scoring")
    profile = roles_profile().model_copy(update={"contention": make_profile(max_running=1).contention})
    roles = profile.roles
    assert roles is not None
    slow = profile.model_copy(update={"roles": roles.model_copy(update={"sharing_efficiency_by_threads": {1: 0.5}})})
    fast = profile.model_copy(update={"roles": roles.model_copy(update={"sharing_efficiency_by_threads": {1: 1.0}})})
    ev_slow, ev_fast = (evaluate(two_core_node, p, fixed_workload(), spec, steps=4) for p in (slow, fast))
    assert "sharing_efficiency 0.50" in ev_slow.extra["async"]["assumptions"][0]
    assert "sharing_efficiency 1.00" in ev_fast.extra["async"]["assumptions"][0]
    assert ev_fast.step_time_s == pytest.approx(1.3)  # core 1's work; the weight load is on the engine's core
    assert ev_slow.rollouts_per_hour < 0.95 * ev_fast.rollouts_per_hour


def test_the_search_tries_async_with_each_bound_and_ranks_it(two_core_node: NodeSpec) -> None:
    search = SearchSpec(
        runtimes=["const"],
        batchers=[BatcherSpec(kind="fixed", batch_size=2, window=4)],
        schedules=["sequential", "overlapped", "async"],
        max_staleness=[0, 1],
        colocated=[False],
        scoring_shares=[0.5],
        steps=4,
    )
    specs = enumerate_placements(search)
    assert sorted(s.schedule_label() for s in specs) == ["async s<=0", "async s<=1", "overlapped", "sequential"]
    profile = make_profile(max_running=1)
    ranked = run_search(two_core_node, profile, fixed_workload(), search, Candidates(specs, []), noise=False)
    assert ranked[0].spec.schedule_label() == "async s<=1"  # worked out in the test above: 4.2 s a step
    assert [ev.rollouts_per_hour for ev in ranked] == sorted((ev.rollouts_per_hour for ev in ranked), reverse=True)


def test_plan_prints_and_writes_the_async_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {
        "nodes": {"count": 1, "cores": 2, "kind": "cpu-2core-illustrative"},
        "profiles": {"cpu-2core-illustrative": str(ROOT / "configs" / "profiles" / "example_cpu_2core.json")},
        "workload": {"prompts_per_step": 4, "group_size": 4, "response_tokens": {"kind": "fixed", "tokens": 64}},
        "search": {
            "runtimes": ["eager"],
            "batchers": [{"kind": "sorted", "batch_size": 8, "window": 8}],
            "schedules": ["overlapped", "async"],
            "max_staleness": [1, 2],
            "colocated": [True],
            "steps": 3,
        },
        "simulation": {"steps": 4},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["plan", str(path), "--json", str(tmp_path / "plan.json")]) == 0
    out = capsys.readouterr().out
    assert "async s<=2" in out and "staleness" in out
    plan = json.loads((tmp_path / "plan.json").read_text())
    async_rows = [r for r in plan["ranked"] if r["placement"]["schedule"] == "async"]
    assert {r["async"]["max_staleness"] for r in async_rows} == {1, 2}
    for row in async_rows:
        assert row["rollouts_per_hour"] == pytest.approx(row["async"]["steady_rollouts_trained_per_hour"])
        assert "assumptions" in row["async"]  # colocated: the trainer's contention is an assumption, said so


def test_a_queue_smaller_than_a_batch_is_refused_before_planning(tmp_path: Path) -> None:
    from rlsim.errors import ConfigError
    from rlsim.planner.spec.cluster import load_plan_config

    cfg = {
        "nodes": {"count": 1, "cores": 2, "kind": "k"},
        "profiles": {"k": "p.json"},
        "workload": {"prompts_per_step": 4, "group_size": 4, "response_tokens": {"kind": "fixed", "tokens": 8}},
        "placement": {"runtime": "eager", "batcher": {"kind": "fixed", "batch_size": 4}, "schedule": "async"},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="queue_size 8 rollouts cannot hold one training batch"):
        load_plan_config(path, ["placement.queue_size=8"])


# ---- validation ---------------------------------------------------------------------------------
class FakeAsyncRunner:
    """Writes an async results.json: step ``i`` took ``step_s[i]`` and trained one batch."""

    def __init__(self, step_s: list[float]) -> None:
        self.step_s = step_s

    def run(self, case: LoopCase, out: Path) -> RunResults:
        w = case.config.workload
        batch = w.prompts_per_step * w.group_size
        steps = [
            {
                "step": i,
                "schedule": "async",
                "time_s": {"generate": t, "score": 0.1, "update": 0.2, "sync": 0.1, "idle": 0.0, "total": t},
                "rollouts": {"generated": batch if i < len(self.step_s) else 0, "scored": batch, "trained": batch},
                "tokens": {"generated": 100},
            }
            for i, t in enumerate(self.step_s, start=1)
        ]
        total = sum(self.step_s)
        results = {
            "config": case.config.model_dump(mode="json"),
            "complete": True,
            "steps": steps,
            "async": {
                "max_staleness": 1,
                "staleness_histogram": {"0": batch, "1": batch * (len(steps) - 1)},
                "trainer_idle_fraction": 0.3,
                "rollout_idle_fraction": 0.1,
                "rollouts_trained_per_hour": batch * len(steps) * 3600 / total,
            },
            "rollouts_total": {
                "generated": batch * len(steps),
                "trained": batch * len(steps),
                "dropped_stale": 0,
                "unfinished_at_end": 0,
            },
        }
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results))
        return RunResults.parse(results, out / "results.json")

    def close(self) -> None:
        pass


def async_cases(tmp_path: Path) -> list[LoopCase]:
    profile = make_profile(step_s=0.01, per_seq_s=0.001)
    save_profile(profile.model_copy(update={"runtimes": {"eager": profile.runtimes["const"]}}), tmp_path / "p.json")
    doc = {
        "base": str(ROOT / "configs" / "default.yaml"),
        "profile": "p.json",
        "steps": 3,
        "run": {"reward": {"runtime": "eager"}, "policy": {"backend": "vllm"}, "schedule": "async"},
        "configs": [{"name": "a1", "run": {"async": {"max_staleness": 1}, "workload": {"prompts_per_step": 2}}}],
    }
    (tmp_path / "set.yaml").write_text(yaml.safe_dump(doc))
    loop_set, base = load_loop_set(tmp_path / "set.yaml")
    return resolve_cases(loop_set, base)


def test_async_configs_are_compared_on_rollouts_trained_per_hour(tmp_path: Path) -> None:
    from rlsim.planner.profile.schema import load_profile

    cases = async_cases(tmp_path)
    profile = load_profile(tmp_path / "p.json")
    # Steps 2 and 3 are measured (step 1 is warm-up and the pipeline's fill): 2 x 8 rollouts in 3 + 5 s.
    report = run_validation(cases, profile, FakeAsyncRunner([10.0, 3.0, 5.0]), tmp_path / "runs", None)
    entry = report["configs"][0]
    assert entry["metric"] == "rollouts_trained_per_hour"
    assert entry["measured_rollouts_per_hour"] == pytest.approx(16 * 3600 / 8.0)
    predicted = predict_step(cases[0].config, profile, replay=[2, 3])
    later = predicted.steps[1:]  # the predicted run's steps 2 and 3
    rate = sum(s.rollouts for s in later) * 3600 / sum(s.time_s["total"] for s in later)
    assert entry["predicted_rollouts_per_hour"] == pytest.approx(rate)
    assert entry["error"] == pytest.approx(rate / (16 * 3600 / 8.0) - 1)
    assert entry["whole_run"]["rollouts_trained_per_hour"]["measured"] == pytest.approx(24 * 3600 / 18.0)
    assert entry["rollouts_total"]["predicted"]["trained"] == 24


def test_the_async_validation_set_is_async_and_unused_in_calibration() -> None:
    from rlsim.planner.validate.command import prepare_validation

    cases, _, _, _, _ = prepare_validation(ROOT / "configs" / "validate_cpu_async.yaml", [], None)  # predicts each too
    assert len(cases) >= 2 and all(c.config.schedule == "async" for c in cases)
    assert {(c.config.placement.preset, c.config.async_.max_staleness) for c in cases} >= {("split", 1), ("shared", 1)}
    calibration, base = load_loop_set(ROOT / "configs" / "profiles" / "calibrate_cpu.yaml")
    calibrated = resolve_cases(calibration, base)
    assert all(c.config.schedule != "async" for c in calibrated)
    workloads = {c.config.workload.model_dump_json() for c in calibrated}
    assert not workloads & {c.config.workload.model_dump_json() for c in cases}
