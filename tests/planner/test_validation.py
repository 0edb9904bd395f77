"""``rlsim plan validate`` logic with a fake loop runner: sets, predictions, arithmetic, JSON, reuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlsim.cli.main import main
from rlsim.errors import ConfigError, RlsimError
from rlsim.planner.measure.loop_runner import LOAD_FILE, actor_key, run_cases
from rlsim.planner.measure.loop_set import LoopCase, deep_merge, load_loop_set, resolve_cases
from rlsim.planner.profile.schema import load_profile, save_profile
from rlsim.planner.validate.command import validate_command
from rlsim.planner.validate.compare import run_validation
from rlsim.planner.validate.predict import loop_trace, predict_step
from rlsim.rollout.prompts import make_step_requests
from tests.helpers.planner_cases import make_profile

ROOT = Path(__file__).resolve().parents[2]


def loop_profile() -> Any:
    """``make_profile`` with the runtime the loop configs below use (eager = the constant 0.5 s scorer)."""
    profile = make_profile(step_s=0.01, per_seq_s=0.001)
    return profile.model_copy(update={"runtimes": {"eager": profile.runtimes["const"]}})


def write_set(tmp_path: Path, configs: list[dict[str, Any]], **top: Any) -> Path:
    save_profile(loop_profile(), tmp_path / "profile.json")
    doc = {
        "base": str(ROOT / "configs" / "default.yaml"),
        "profile": "profile.json",
        "steps": 3,
        "run": {"reward": {"runtime": "eager"}, "policy": {"backend": "hf"}},
        "configs": configs,
        **top,
    }
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class FakeRunner:
    """Writes a results.json whose every step takes ``step_s[name]`` seconds (split into phases)."""

    def __init__(self, step_s: dict[str, list[float]], foreign: dict[str, list[float]] | None = None) -> None:
        self.step_s = step_s
        self.foreign = foreign or {}
        self.ran: list[str] = []
        self.closed = False

    def run(self, case: LoopCase, out: Path) -> dict[str, Any]:
        self.ran.append(case.name)
        w = case.config.workload
        steps = []
        for i, total in enumerate(self.step_s[case.name], start=1):
            generated = sum(r.response_tokens for r in make_step_requests(w.spec, i, w.prompts_per_step, w.group_size))
            steps.append(
                {
                    "step": i,
                    "time_s": {
                        "generate": total * 0.5,
                        "score": total * 0.2,
                        "update": total * 0.2,
                        "sync": total * 0.1,
                        "idle": 0.0,
                        "total": total,
                    },
                    "rollouts": {"generated": w.prompts_per_step * w.group_size},
                    "tokens": {"generated": generated},
                }
            )
        results = {"config": case.config.model_dump(mode="json"), "complete": True, "steps": steps}
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results))
        if case.name in self.foreign:  # what RealLoopRunner records: other programs' share per step
            loads = [{"step": i, "foreign_cpu_share": x} for i, x in enumerate(self.foreign[case.name], start=1)]
            (out / LOAD_FILE).write_text(json.dumps({"steps": loads}))
        return results

    def close(self) -> None:
        self.closed = True


TWO = [
    {"name": "a", "run": {"schedule": "sequential", "workload": {"prompts_per_step": 2, "group_size": 2}}},
    {"name": "b", "run": {"schedule": "overlapped", "workload": {"prompts_per_step": 3, "group_size": 2}}},
]


def test_errors_predictions_and_json_with_a_fake_runner(tmp_path: Path) -> None:
    path = write_set(tmp_path, TWO)
    loop_set, base_dir = load_loop_set(path)
    cases = resolve_cases(loop_set, base_dir)
    profile = loop_profile()
    expected = {}
    for case in cases:  # the planner's own prediction of steps 2 and 3, each replayed with its lengths
        totals = [s.time_s["total"] for s in predict_step(case.config, profile, replay=[2, 3]).steps]
        expected[case.name] = (totals[0] + totals[1]) / 2  # median of two
    # Step 1 is warm-up (100 s, ignored); the median of steps 2-3 is what gets compared.
    runner = FakeRunner({"a": [100.0, 2.0, 4.0], "b": [100.0, 5.0, 5.0]})
    report = run_validation(cases, profile, runner, tmp_path / "runs", tmp_path / "v.json", warmup_steps=1)
    by_name = {e["name"]: e for e in report["configs"]}
    assert by_name["a"]["measured_step_s"] == pytest.approx(3.0)
    assert by_name["b"]["measured_step_s"] == pytest.approx(5.0)
    for name, measured in (("a", 3.0), ("b", 5.0)):
        entry = by_name[name]
        assert entry["predicted_step_s"] == pytest.approx(expected[name])
        assert entry["error"] == pytest.approx(expected[name] / measured - 1)
        rollouts = entry["rollouts_per_step"]
        assert entry["measured_rollouts_per_hour"] == pytest.approx(rollouts * 3600 / measured)
        assert entry["predicted_rollouts_per_hour"] == pytest.approx(rollouts * 3600 / expected[name])
        assert entry["steps"] == [2, 3] and entry["phases_s"]["generate"]["measured"] == pytest.approx(measured / 2)
    errors = sorted(abs(e["error"]) for e in report["configs"])
    assert report["median_abs_error"] == pytest.approx((errors[0] + errors[1]) / 2)
    assert report["max_abs_error"] == pytest.approx(errors[1])
    on_disk = json.loads((tmp_path / "v.json").read_text())
    assert on_disk["complete"] is True and [c["name"] for c in on_disk["configs"]] == ["a", "b"]


def test_reuse_skips_runs_of_the_same_config_only(tmp_path: Path) -> None:
    path = write_set(tmp_path, TWO)
    cases = resolve_cases(*load_loop_set(path))
    first = FakeRunner({"a": [1.0, 2.0, 2.0], "b": [1.0, 3.0, 3.0]})
    run_validation(cases, loop_profile(), first, tmp_path / "runs", None)
    again = FakeRunner({"a": [9.0, 9.0, 9.0], "b": [9.0, 9.0, 9.0]})
    report = run_validation(cases, loop_profile(), again, tmp_path / "runs", None, reuse=True)
    assert again.ran == [] and [e["reused"] for e in report["configs"]] == [True, True]
    # A setting the loop gained after the run (absent from the stored config, default value) is no change.
    stored = json.loads((tmp_path / "runs" / "a" / "results.json").read_text())
    del stored["config"]["faults"]
    (tmp_path / "runs" / "a" / "results.json").write_text(json.dumps(stored))
    assert run_cases(cases[:1], again, tmp_path / "runs", reuse=True) and again.ran == []
    assert report["configs"][0]["measured_step_s"] == pytest.approx(2.0)
    # A changed config is run again even with reuse: the old results measured something else.
    changed = resolve_cases(*load_loop_set(path, ["steps=4"]))
    third = FakeRunner({"a": [9.0] * 4, "b": [9.0] * 4})
    run_cases(changed, third, tmp_path / "runs", reuse=True)
    assert third.ran == ["a", "b"] and third.closed


def test_validate_command_writes_json_and_the_table_after_checking_everything(tmp_path: Path) -> None:
    path = write_set(tmp_path, TWO)
    runner = FakeRunner({"a": [1.0, 2.0, 2.0], "b": [1.0, 3.0, 3.0]})
    report = validate_command(
        path, [], None, tmp_path / "runs", tmp_path / "out" / "v.json", reuse=False, runner=runner
    )
    assert runner.closed and report["profile"]["hardware_kind"] == "test-kind"
    assert json.loads((tmp_path / "out" / "v.json").read_text())["median_abs_error"] == report["median_abs_error"]
    # A runtime the profile lacks is refused before any loop runs.
    bad = write_set(tmp_path, [{"name": "c", "run": {"reward": {"runtime": "ort"}}}])
    idle = FakeRunner({})
    with pytest.raises(RlsimError, match="no latency model for runtime 'ort'"):
        validate_command(bad, [], None, tmp_path / "runs", tmp_path / "x.json", reuse=False, runner=idle)
    assert idle.ran == []


def test_every_bad_entry_is_reported_at_once(tmp_path: Path) -> None:
    path = write_set(
        tmp_path,
        [
            {"name": "ok", "run": {}},
            {"name": "typo", "run": {"schedul": "sequential"}},
            {"name": "short", "run": {"workload": {"group_size": 1}}},
        ],
    )
    with pytest.raises(ConfigError) as err:
        resolve_cases(*load_loop_set(path))
    text = str(err.value)
    assert "typo: schedul" in text and "short: workload.group_size" in text and "ok:" not in text
    doubled = write_set(tmp_path, [{"name": "x"}, {"name": "x"}])
    with pytest.raises(ConfigError, match="repeated: x"):
        load_loop_set(doubled)
    with pytest.raises(RlsimError, match="must exceed warmup_steps"):
        resolve_cases(*load_loop_set(write_set(tmp_path, [{"name": "x"}], steps=1)))


def test_a_set_that_extends_another_runs_its_entries_unchanged_and_adds_its_own(tmp_path: Path) -> None:
    anchor = {"set": "set.yaml", "config": "a"}
    parent = write_set(tmp_path, [{"name": "a", "run": {"schedule": "overlapped"}}], anchor=anchor)
    sub = tmp_path / "more"
    sub.mkdir()
    child = sub / "child.yaml"
    child.write_text(
        yaml.safe_dump(
            {
                "extends": "../set.yaml",
                "run": {"reward": {"batch_size": 4}, "workload": {"group_size": 2}},
                "configs": [{"name": "b", "run": {"workload": {"group_size": 8}}}, {"name": "c"}],
            }
        )
    )
    own = resolve_cases(*load_loop_set(parent))
    loop_set, base_dir = load_loop_set(child, ["steps=4"])
    cases = resolve_cases(loop_set, base_dir)
    assert [c.name for c in cases] == ["a", "b", "c"] and loop_set.profile == str(tmp_path / "profile.json")
    assert loop_set.anchor is not None and loop_set.anchor.set == str(parent)
    # The other set's entry is its own run (the overrides aside); the new ones get this set's run under their own.
    assert cases[0].config == own[0].config.model_copy(update={"steps": 4})
    assert [c.config.workload.group_size for c in cases] == [own[0].config.workload.group_size, 8, 2]
    assert [c.config.reward.batch_size for c in cases] == [own[0].config.reward.batch_size, 4, 4]
    assert cases[1].config.reward.runtime == "eager" and cases[1].config.policy.backend == "hf"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"extends": "set.yaml", "steps": 2, "configs": []}, "steps: a set that extends set.yaml takes it from there"),
        ({"extends": "nowhere.yaml", "configs": []}, "nowhere.yaml is not a file"),
        ({"extends": "child.yaml", "configs": []}, "leads back to a set already extended"),
        ({"extends": 3, "configs": []}, "extends: name a loop-set YAML"),
        ({"extends": "set.yaml", "configs": {"name": "x"}}, "configs must be a list"),
        ({"extends": "set.yaml", "configs": [{"name": "a"}]}, "repeated: a"),
        ({"extends": "a" * 5000, "configs": []}, "extends: cannot look for that file"),
        ({"extends": None, "configs": []}, "extends: name a loop-set YAML"),
    ],
)
def test_a_bad_extends_is_a_config_error(tmp_path: Path, doc: dict[str, Any], message: str) -> None:
    write_set(tmp_path, [{"name": "a"}])
    child = tmp_path / "child.yaml"
    child.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=message):
        load_loop_set(child)


def test_the_vllm_calibration_set_is_the_calibration_set_and_four_vllm_runs() -> None:
    base = resolve_cases(*load_loop_set(ROOT / "configs/profiles/calibrate_cpu.yaml"))
    more = resolve_cases(*load_loop_set(ROOT / "configs/profiles/calibrate_cpu_vllm.yaml"))
    assert [c.config for c in more[: len(base)]] == [c.config for c in base]
    added = more[len(base) :]
    assert [c.config.reward.runtime for c in added] == ["vllm"] * 4
    assert sorted(c.config.schedule for c in added) == ["overlapped"] * 2 + ["sequential"] * 2
    vset, folder = load_loop_set(ROOT / "configs/validate_cpu_vllm.yaml")
    validated = resolve_cases(vset, folder)
    assert not {c.name for c in validated} & {c.name for c in more}
    # The set's default profile was made with this calibration set: vllm's factor and contention are its own.
    assert vset.profile is not None
    profile = load_profile(folder / vset.profile)
    assert profile.runtimes["vllm"].in_loop_factor_measured and not profile.runtimes["vllm"].pads
    assert profile.contention is not None and "vllm" in profile.contention.per_runtime


def test_cli_validate_errors_are_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 2
    assert "rlsim plan validate" in capsys.readouterr().err
    assert main(["plan", "validate", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    path = write_set(tmp_path, TWO, profile="nowhere.json")
    assert main(["plan", "validate", str(path)]) == 2
    assert "rlsim profile" in capsys.readouterr().err
    assert main(["plan", "cluster.yaml", str(path)]) == 2
    assert "goes after `validate`" in capsys.readouterr().err


def test_a_role_placed_by_hand_is_refused_before_any_run(tmp_path: Path) -> None:
    # The scorer moved onto the rollout actor's core: the planner only knows the presets' placements.
    hand = {"name": "c", "run": {"placement": {"preset": "split", "scorer": {"cores": [0]}, "trainer": {"threads": 1}}}}
    runner = FakeRunner({"a": [1.0] * 3, "b": [1.0] * 3, "c": [1.0] * 3})
    with pytest.raises(RlsimError, match=r"placement.scorer.cores=\[0\], placement.trainer.threads=1.*preset 'split'"):
        validate_command(
            write_set(tmp_path, [*TWO, hand]), [], None, tmp_path / "out", tmp_path / "v.json", False, runner
        )
    assert runner.ran == []  # found before anything started


def test_deprecated_validate_flag_still_works_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_set(tmp_path, TWO, profile="nowhere.json")
    assert main(["plan", "--validate", str(path)]) == 2  # reaches the same checks as `plan validate PATH`
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "note: `rlsim plan --validate` is deprecated; use `rlsim plan validate [VALIDATION.yaml]`"
    assert "nowhere.json" in err[1] and "rlsim profile" in err[1]


def test_default_validation_set_needs_a_source_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlsim.cli import plan_cmd

    # In this checkout the default exists; installed from a wheel there is no configs/ beside the package.
    assert (plan_cmd.CHECKOUT_CONFIGS / "validate_cpu.yaml") == ROOT / "configs" / "validate_cpu.yaml"
    monkeypatch.setattr(plan_cmd, "CHECKOUT_CONFIGS", tmp_path / "site-packages" / "configs")
    for argv in (["plan", "validate"], ["plan", "--validate"]):
        assert main(argv) == 2
        assert "name one, e.g. rlsim plan validate path/to/validate_cpu.yaml" in capsys.readouterr().err


def test_deep_merge_changes_only_the_keys_named() -> None:
    base = {"a": {"b": 1, "c": 2}, "d": [1]}
    merged = deep_merge(base, {"a": {"c": 3}, "d": [2]})
    assert merged == {"a": {"b": 1, "c": 3}, "d": [2]} and base == {"a": {"b": 1, "c": 2}, "d": [1]}


def test_actors_are_shared_only_when_nothing_they_are_built_from_differs(tmp_path: Path) -> None:
    path = write_set(
        tmp_path,
        [
            {"name": "a", "run": {"schedule": "sequential"}},
            {"name": "b", "run": {"schedule": "overlapped", "micro_batch": 4, "workload": {"prompts_per_step": 3}}},
            {"name": "c", "run": {"placement": {"preset": "split"}}},
            {"name": "d", "run": {"reward": {"batch_size": 8}}},
        ],
    )
    keys = [actor_key(c.config) for c in resolve_cases(*load_loop_set(path))]
    assert keys[0] == keys[1] and len({keys[0], keys[2], keys[3]}) == 3


def test_replayed_lengths_are_the_ones_the_loop_requests(tmp_path: Path) -> None:
    case = resolve_cases(*load_loop_set(write_set(tmp_path, TWO)))[1]
    w = case.config.workload
    trace = loop_trace(case.config, [2, 5])
    for (prompts, responses), step in zip(trace, (2, 5), strict=True):
        requests = make_step_requests(w.spec, step, w.prompts_per_step, w.group_size)
        assert responses == [r.response_tokens for r in requests]
        assert prompts == [32] * len(requests)  # the default workload's fixed 32-token prompts
    assert trace[0][1] != trace[1][1]  # different steps, different draws


def test_steps_disturbed_by_other_programs_are_left_out_but_reported(tmp_path: Path) -> None:
    cases = resolve_cases(*load_loop_set(write_set(tmp_path, TWO)))
    # a: step 3 ran while other programs took 60 % of the cores (and took 10 s instead of 2 s).
    # b: every measured step was disturbed, so none is dropped (nothing would be left).
    runner = FakeRunner(
        {"a": [1.0, 2.0, 10.0], "b": [1.0, 3.0, 3.0]}, foreign={"a": [0.0, 0.05, 0.6], "b": [0.0, 0.5, 0.5]}
    )
    report = run_validation(cases, loop_profile(), runner, tmp_path / "runs", None, disturbed_above=0.15)
    a, b = report["configs"]
    assert a["steps"] == [2] and a["dropped_steps"] == [3] and a["measured_step_s"] == pytest.approx(2.0)
    assert a["error"] == pytest.approx(a["predicted_step_s"] / 2.0 - 1)
    predicted_all = (a["predicted_step_s"] + loop_profile_step(cases[0], 3)) / 2
    assert a["error_all_steps"] == pytest.approx(predicted_all / 6.0 - 1)  # medians of steps 2-3
    assert a["foreign_cpu_share"] == {"2": 0.05, "3": 0.6}
    assert b["steps"] == [2, 3] and b["dropped_steps"] == []


def loop_profile_step(case: LoopCase, step: int) -> float:
    return predict_step(case.config, loop_profile(), replay=[step]).steps[0].time_s["total"]


def test_foreign_share_counts_what_the_run_did_not_use() -> None:
    from rlsim.planner.measure.machine_load import CpuSample, foreign_share, sample

    before, after = CpuSample(0.0, 10.0, 100.0), CpuSample(5.0, 16.0, 110.0)
    # 10 core-seconds passed, 6 were busy, 2 of them ours: others used 4 / 10.
    assert foreign_share(before, after, own_cpu_s=2.0) == pytest.approx(0.4)
    assert foreign_share(before, after, own_cpu_s=9.0) == 0.0  # never negative
    assert foreign_share(None, after, 1.0) is None
    now = sample()
    assert now is None or now.total_s >= now.busy_s > 0


def test_deep_merge_replaces_a_mapping_that_switches_kind() -> None:
    """lognormal -> fixed lengths: the lognormal fields must not leak into the fixed variant."""
    base = {"response": {"kind": "lognormal", "mean": 64, "sigma": 0.6}, "prompt": {"kind": "fixed", "tokens": 4}}
    merged = deep_merge(base, {"response": {"kind": "fixed", "tokens": 8}, "prompt": {"tokens": 6}})
    assert merged == {"response": {"kind": "fixed", "tokens": 8}, "prompt": {"kind": "fixed", "tokens": 6}}


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "configs").glob("validate_cpu*.yaml")))
def test_every_shipped_validation_set_is_apart_from_calibration_and_predictable(name: str) -> None:
    # Each set loads, shares no configuration name with the calibration set, anchors on a calibration config, and
    # every configuration is predicted from the set's own profile (its runtimes, roles and entries all there).
    from rlsim.planner.profile.schema import load_profile
    from rlsim.planner.validate.predict import case_profile

    loop_set, base = load_loop_set(ROOT / "configs" / name)
    calibration, cal_base = load_loop_set(ROOT / "configs" / "profiles" / "calibrate_cpu.yaml")
    cal_names = {c.name for c in resolve_cases(calibration, cal_base)}
    cases = resolve_cases(loop_set, base)
    assert cases and not {c.name for c in cases} & cal_names
    assert loop_set.anchor is not None and loop_set.anchor.config in cal_names
    profile = load_profile(base / loop_set.profile)
    for case in cases:
        steps = predict_step(case.config, case_profile(profile, case.config.reward.runtime, case.profile_runtime),
                             replay=[2]).steps  # fmt: skip
        assert steps[0].time_s["total"] > 0, case.name


def test_the_quiet_gate_waits_its_own_window_until_the_cores_are_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlsim.planner.measure import machine_load
    from rlsim.planner.measure.loop_set import QuietGate

    # Windows of 10 core-seconds: busy 8 (other work), then 1 (quiet). Each window reads two samples.
    samples = iter([(0, 0), (8, 10), (8, 10), (9, 20)])
    monkeypatch.setattr(machine_load, "sample", lambda: machine_load.CpuSample(0.0, *map(float, next(samples))))
    slept: list[float] = []
    monkeypatch.setattr(machine_load.time, "sleep", slept.append)
    notes: list[str] = []
    gate = QuietGate(busy_below=0.3, max_wait_s=60, window_s=0.25)
    record = gate.wait(notes.append)
    assert slept == [0.25, 0.25]  # the gate's window, twice: once busy, once quiet
    assert record["quiet"] is True and record["busy_share"] == pytest.approx(0.1)
    assert len(notes) == 1 and "80% busy" in notes[0]
    assert QuietGate().window_s == 0.5
    with pytest.raises(ValueError, match="window_s"):
        QuietGate(window_s=0.0)


class _StubSession:
    """What RealLoopRunner needs of a LoopSession: ``step`` (records the step numbers run) and ``describe``."""

    def __init__(self) -> None:
        self.ran: list[int] = []
        self.async_run = None
        self.config: Any = None

    def step(self, step: int) -> tuple[Any, list[Any]]:
        from rlsim.run_results import StepRecord

        self.ran.append(step)
        times = {"generate": 1.0, "score": 0.5, "update": 1.0, "sync": 0.1, "idle": 0.0, "total": 2.6 + step}
        counts = {"generated": 4, "scored": 4, "trained": 4}
        record = StepRecord(step=step, time_s=times, rollouts=counts, tokens={"generated": 40, "prompt": 16})
        return record, []

    def describe(self) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(
    ("schedule", "fresh", "warmup", "run_steps", "recorded"),
    [
        ("sequential", True, 1, [1, 2, 3], 1),  # just started: the warm-up step runs and is recorded as such
        ("sequential", False, 1, [2, 3], 0),  # warm actors: the same measured steps, no warm-up
        ("overlapped", False, 1, [2, 3], 0),
        ("sequential", False, 2, [3], 0),  # the case's own count (an anchor keeps its calibration set's)
        ("sequential", True, None, [1, 2, 3], None),  # no count given: every step runs, nothing is recorded
        ("async", False, 1, [1, 2, 3], 1),  # an async run's first step fills its pipeline: always run
    ],
)
def test_the_runner_runs_warm_up_steps_only_where_the_actors_were_just_started(
    tmp_path: Path, schedule: str, fresh: bool, warmup: int | None, run_steps: list[int], recorded: int | None
) -> None:
    from dataclasses import replace

    from rlsim.planner.measure.loop_results import read_loop_steps
    from rlsim.planner.measure.loop_runner import RealLoopRunner

    backend = "vllm" if schedule == "async" else "hf"
    path = write_set(tmp_path, [{"name": "a", "run": {"schedule": schedule, "policy": {"backend": backend}}}])
    loop_set, base = load_loop_set(path)
    case = replace(resolve_cases(loop_set, base, source=str(path))[0], warmup_steps=warmup)
    runner = RealLoopRunner(show_progress=False)
    stub = _StubSession()
    runner.sessions.append({"configs": [], "startup_s": {}})
    runner._session_for = lambda _case: (stub, fresh)  # type: ignore[method-assign]
    results = runner.run(case, tmp_path / "a")
    assert stub.ran == run_steps
    assert results.warmup_steps == recorded
    # the measured steps read back from the file with the set's skip_first (1) are the case's own
    measured = list(range((warmup if warmup is not None else 1) + 1, 4))
    assert read_loop_steps(tmp_path / "a" / "results.json", skip_first=1).numbers == measured


def test_a_loop_sets_cases_carry_its_warm_up_count(tmp_path: Path) -> None:
    path = write_set(tmp_path, TWO, warmup_steps=2)
    loop_set, base = load_loop_set(path)
    assert [c.warmup_steps for c in resolve_cases(loop_set, base, source=str(path))] == [2, 2]
