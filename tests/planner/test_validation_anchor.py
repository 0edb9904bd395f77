"""Anchored validation (``validate/anchor.py``) on a stub host whose speed drifts over the session.

The host is a fake loop runner: every run takes exactly what the planner predicts for it, slowed by a
factor that grows with each run started (all phases, or generation only). The machinery around the
real loop (sets, prediction, interleaving, JSON, the table) is rlsim's own.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from rlsim.cli.main import build_parser
from rlsim.cli.profile_cmd import fit_check_line
from rlsim.errors import ConfigError, RlsimError
from rlsim.planner.measure.loop_results import anchor_record
from rlsim.planner.measure.loop_set import LoopCase, load_loop_set, resolve_cases
from rlsim.planner.profile.schema import CalibrationSet, load_profile, save_profile
from rlsim.planner.validate.anchor import apply_anchor, identical_run_floor
from rlsim.planner.validate.command import validate_command, validation_table
from rlsim.planner.validate.compare import own_run_errors
from rlsim.planner.validate.predict import predict_step
from rlsim.rollout.prompts import make_step_requests
from tests.helpers.planner_cases import make_profile

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("generate", "score", "update", "sync", "idle")
SEQ = {"schedule": "sequential"}


def profile() -> Any:
    p = make_profile(step_s=0.05, per_seq_s=0.004, score_s=0.3)
    return p.model_copy(update={"runtimes": {"eager": p.runtimes["const"]}})


def workload(prompts: int, group: int, mean: int) -> dict[str, Any]:
    spec = {"seed": 3, "prompt": {"kind": "fixed", "tokens": 16}}
    spec["response"] = {"kind": "lognormal", "mean": mean, "sigma": 0.3, "min": 8, "max": 256}
    return {"prompts_per_step": prompts, "group_size": group, "spec": spec}


def write_sets(tmp_path: Path, anchor: dict[str, Any] | None, names: tuple[str, ...] = ("v1", "v2", "v3")) -> Path:
    """A calibration set (cal-a, cal-async) and a validation set of ``names`` anchored by ``anchor``."""
    save_profile(profile(), tmp_path / "profile.json")
    common = {
        "base": str(ROOT / "configs" / "default.yaml"),
        "steps": 3,
        "run": {"reward": {"runtime": "eager"}, "policy": {"backend": "hf"}},
    }
    calibration = {
        **common,
        "configs": [
            {"name": "cal-a", "run": {**SEQ, "workload": workload(4, 2, 64)}},
            {
                "name": "cal-async",
                "run": {"schedule": "async", "policy": {"backend": "vllm"}, "workload": workload(4, 2, 64)},
            },
        ],
    }
    (tmp_path / "cal.yaml").write_text(yaml.safe_dump(calibration))
    sizes = [(2, 2, 160), (8, 2, 16), (4, 4, 48), (2, 4, 96)]
    configs = [{"name": n, "run": {**SEQ, "workload": workload(*sizes[i % 4])}} for i, n in enumerate(names)]
    doc = {**common, "profile": "profile.json", "configs": configs, **({"anchor": anchor} if anchor else {})}
    path = tmp_path / "validate.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class DriftingHost:
    """Each run takes the planner's prediction of its steps, times ``1 + drift * k`` for the k-th run started
    (k = 0, 1, ...); ``only`` limits the slowdown to those phases (the step grows by their extra time)."""

    def __init__(self, drift: float, only: tuple[str, ...] = PHASES, off: dict[str, float] | None = None) -> None:
        self.drift, self.only, self.off = drift, only, off or {}
        self.ran: list[str] = []
        self.closed = False

    def run(self, case: LoopCase, out: Path) -> dict[str, Any]:
        slow = (1 + self.drift * len(self.ran)) * self.off.get(case.name, 1.0)  # off: the model's miss on it
        self.ran.append(case.name)
        predicted = predict_step(case.config, profile(), replay=list(range(1, case.config.steps + 1)))
        w = case.config.workload
        steps = []
        requests = [
            make_step_requests(w.spec, i, w.prompts_per_step, w.group_size) for i in range(1, len(predicted.steps) + 1)
        ]
        for i, s in enumerate(predicted.steps, start=1):
            times = {p: s.time_s[p] * (slow if p in self.only else 1.0) for p in PHASES}
            times["total"] = s.time_s["total"] + sum(times[p] - s.time_s[p] for p in PHASES)
            steps.append(
                {
                    "step": i,
                    "time_s": times,
                    "rollouts": {"generated": w.prompts_per_step * w.group_size},
                    "tokens": {"generated": sum(r.response_tokens for r in requests[i - 1])},
                }
            )
        out.mkdir(parents=True, exist_ok=True)
        results = {"config": case.config.model_dump(mode="json"), "complete": True, "steps": steps}
        (out / "results.json").write_text(json.dumps(results))
        return results

    def close(self) -> None:
        self.closed = True


def validate(
    tmp_path: Path, path: Path, host: DriftingHost, console: Console | None = None, reuse: bool = False, **kw: Any
) -> dict[str, Any]:
    console = console or Console(file=io.StringIO(), width=300)
    return validate_command(path, [], None, tmp_path / "runs", tmp_path / "v.json", reuse, host, console, **kw)


def test_the_raw_error_carries_the_hosts_drift_and_the_anchored_error_does_not(tmp_path: Path) -> None:
    host = DriftingHost(drift=0.03)
    report = validate(tmp_path, write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"}), host)
    assert host.ran == ["cal-a", "v1", "cal-a", "v2", "cal-a", "v3", "cal-a"] and host.closed
    raw = [e["error"] for e in report["configs"]]
    assert raw == pytest.approx([1 / 1.03 - 1, 1 / 1.09 - 1, 1 / 1.15 - 1], rel=1e-6)  # the host, nothing else
    for e in report["configs"]:
        assert abs(e["anchored_error"]) < 1e-3, e["name"]  # sqrt of the neighbours' slowdowns, off at 2nd order
        assert all(abs(x) < 1e-3 for x in e["anchored_phase_errors"].values())
    assert report["anchored"]["max_abs_error"] < 1e-3 and report["max_abs_error"] > 0.12
    anchor = report["anchor"]
    assert [r["index"] for r in anchor["runs"]] == [1, 2, 3, 4]
    assert [Path(r["run_dir"]).name for r in anchor["runs"]] == ["01", "02", "03", "04"]
    assert anchor["drift"] == pytest.approx(1.18 - 1, rel=1e-6) and anchor["uneven"] is None
    changes = [1.06 / 1.0 - 1, 1.12 / 1.06 - 1, 1.18 / 1.12 - 1]
    assert anchor["floor"]["mean_abs_change"] == pytest.approx(sum(changes) / 3)
    assert anchor["floor"]["ci_low"] < anchor["floor"]["mean_abs_change"] < anchor["floor"]["ci_high"]
    # The steady drift moves consecutive runs apart but not a run from its neighbours' geometric mean.
    assert anchor["floor"]["anchored"]["n"] == 2 and anchor["floor"]["anchored"]["mean_abs_change"] < 3e-3
    on_disk = json.loads((tmp_path / "v.json").read_text())
    assert (
        on_disk["complete"]
        and on_disk["anchoring"] == "on (the set's anchor)"
        and on_disk["anchor"]["config"] == "cal-a"
    )
    title = str(validation_table(report).title)
    assert "anchored on cal-a: median 0.0%" in title and "host drift +18.0%" in title


def test_a_drift_in_generation_only_leaves_a_residual_the_report_names(tmp_path: Path) -> None:
    host = DriftingHost(drift=0.05, only=("generate",))
    report = validate(tmp_path, write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"}), host)
    anchor = report["anchor"]
    assert anchor["phase_drift"]["generate"] == pytest.approx(0.30, rel=1e-6)
    assert "uneven across phases, most in generate (anchor run 4 against run 1: generate +30.0%" in anchor["uneven"]
    assert "phase mix" in anchor["uneven"]
    # Generation's share differs between the configurations, so scaling the step as a whole leaves some of the
    # drift, while each phase scaled by the anchor's own phase ratio comes out right.
    assert max(abs(e["anchored_error"]) for e in report["configs"]) > 0.01
    assert max(abs(e["error"]) for e in report["configs"]) > max(abs(e["anchored_error"]) for e in report["configs"])
    for e in report["configs"]:
        assert abs(e["anchored_phase_errors"]["generate"]) < 2e-3


def test_the_anchor_must_come_from_the_calibration_set_and_is_checked_before_anything_runs(tmp_path: Path) -> None:
    host = DriftingHost(0.0)
    cases = [
        ({"set": "cal.yaml", "config": "v1"}, r"'v1' is not a configuration of the calibration set .*cal-a, cal-async"),
        ({"set": "missing.yaml", "config": "cal-a"}, "anchor.set missing.yaml is not a file"),
        ({"set": "cal.yaml", "config": "cal-async"}, "async schedule, which is compared on throughput"),
    ]
    for anchor, message in cases:
        with pytest.raises(RlsimError, match=message):
            validate(tmp_path, write_sets(tmp_path, anchor), host)
    with pytest.raises(RlsimError, match="named 'anchor-runs'"):
        validate(tmp_path, write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"}, ("v1", "anchor-runs")), host)
    assert host.ran == []


def test_no_anchor_restores_raw_validation_and_a_set_without_one_says_so(tmp_path: Path) -> None:
    host = DriftingHost(0.02)
    report = validate(tmp_path, write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"}), host, anchored=False)
    assert host.ran == ["v1", "v2", "v3"] and "anchored" not in report and "anchor" not in report
    assert report["anchoring"] == "off (--no-anchor)"
    assert build_parser().parse_args(["plan", "validate", "x.yaml", "--no-anchor"]).anchored is False
    assert build_parser().parse_args(["plan", "validate", "x.yaml"]).anchored is True
    console = Console(file=io.StringIO(), width=300)
    plain = validate(tmp_path, write_sets(tmp_path, None), DriftingHost(0.0), console)
    assert plain["anchoring"] == "off (neither the set nor the profile names an anchor)"
    assert "names no anchor" in console.file.getvalue()


def test_an_interrupted_validation_keeps_the_anchored_errors_it_has(tmp_path: Path) -> None:
    class Dies(DriftingHost):
        def run(self, case: LoopCase, out: Path) -> dict[str, Any]:
            if len(self.ran) == 3:  # cal-a v1 cal-a, then v2 fails
                raise RuntimeError("engine died")
            return super().run(case, out)

    with pytest.raises(RuntimeError):
        validate(tmp_path, write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"}), Dies(0.03))
    kept = json.loads((tmp_path / "v.json").read_text())
    assert not kept["complete"] and [e["name"] for e in kept["configs"]] == ["v1"]
    assert abs(kept["configs"][0]["anchored_error"]) < 1e-3 and len(kept["anchor"]["runs"]) == 2


def test_the_floor_needs_two_runs_and_a_ci_three() -> None:
    assert identical_run_floor([1.0]) is None
    two = identical_run_floor([1.0, 1.1])
    assert two is not None and two["mean_abs_change"] == pytest.approx(0.1) and two["ci_low"] is None
    assert two["anchored"] is None
    same = identical_run_floor([2.0, 2.0, 2.0])
    assert same is not None and same["mean_abs_change"] == 0 and same["ci_high"] == 0
    bumpy = identical_run_floor([1.0, 1.2, 1.0, 1.2])
    assert bumpy is not None and bumpy["anchored"]["mean_abs_change"] == pytest.approx((0.2 + 1 / 6) / 2)


def test_a_profile_that_kept_its_anchor_step_gives_the_drift_since_its_own_hour(tmp_path: Path) -> None:
    path = write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"})
    cal = next(c for c in resolve_cases(*load_loop_set(tmp_path / "cal.yaml")) if c.name == "cal-a")
    results = tmp_path / "profile-runs" / "cal-a" / "results.json"
    DriftingHost(0.0).run(cal, results.parent)  # at the profile's hour the host ran exactly as predicted
    kept = anchor_record("cal-a", "cal.yaml", cal.config.model_dump(mode="json"), results, skip_first=1)
    save_profile(profile().model_copy(update={"anchor": kept}), tmp_path / "profile.json")
    report = validate(tmp_path, path, DriftingHost(0.04))
    anchor = report["anchor"]
    assert (
        anchor["drift_since_profile"] == pytest.approx(0.0, abs=1e-9) and "cal-a measured" in anchor["profile_anchor"]
    )
    for e in report["configs"]:  # the stub's model is exact on the anchor, so both corrections agree
        assert e["profile_hour_error"] == pytest.approx(e["anchored_error"], abs=1e-9)
        assert abs(e["profile_hour_error"]) < 2e-3 < abs(e["error"])
    # Another run config under the same name is no anchor of this set: no profile-hour error, and why.
    other = kept.model_copy(update={"run_config": {**kept.run_config, "seed": 99}})
    save_profile(profile().model_copy(update={"anchor": other}), tmp_path / "profile.json")
    report = validate(tmp_path, path, DriftingHost(0.04))
    assert "ran with other settings" in report["anchor"]["profile_anchor"]
    assert report["anchor"]["drift_since_profile"] is None and "profile_hour_error" not in report["configs"][0]
    # A setting the loop gained since, absent from the stored config at its default, is the same run.
    trimmed = {k: v for k, v in kept.run_config.items() if k != "faults"}
    save_profile(
        profile().model_copy(update={"anchor": kept.model_copy(update={"run_config": trimmed})}),
        tmp_path / "profile.json",
    )
    assert validate(tmp_path, path, DriftingHost(0.0))["anchor"]["drift_since_profile"] == pytest.approx(0.0)


def test_the_profile_config_anchor_must_be_a_configuration_of_its_loop_set(tmp_path: Path) -> None:
    write_sets(tmp_path, None)
    base = {"hardware_kind": "k", "runtimes": ["eager"], "loop_set": "cal.yaml"}
    for extra, code, message in (
        ({"anchor": "cal-a"}, 0, "anchor cal-a: its measured step is kept in the profile"),
        ({"anchor": "nope"}, 2, "anchor 'nope' is not a configuration of the loop set"),
        ({"anchor": "cal-a", "loop_set": None}, 2, "anchor names a configuration of loop_set"),
    ):
        config = tmp_path / "profile.yaml"
        config.write_text(yaml.safe_dump({**base, **extra}))
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlsim.cli.main",
                "profile",
                str(config),
                "--out",
                str(tmp_path / "p.json"),
                "--dry-run",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == code and message in out.stdout + out.stderr, out.stdout + out.stderr


def test_a_set_without_an_anchor_uses_the_one_the_profile_kept(tmp_path: Path) -> None:
    path = write_sets(tmp_path, None)
    cal = next(c for c in resolve_cases(*load_loop_set(tmp_path / "cal.yaml")) if c.name == "cal-a")
    results = tmp_path / "profile-runs" / "cal-a" / "results.json"
    DriftingHost(0.0).run(cal, results.parent)
    kept = anchor_record("cal-a", "cal.yaml", cal.config.model_dump(mode="json"), results, skip_first=1)
    save_profile(profile().model_copy(update={"anchor": kept}), tmp_path / "profile.json")
    host = DriftingHost(0.03)
    report = validate(tmp_path, path, host)
    assert (
        host.ran == ["cal-a", "v1", "cal-a", "v2", "cal-a", "v3", "cal-a"]
        and report["anchoring"] == "on (the profile's anchor)"
    )
    assert report["anchored"]["max_abs_error"] < 1e-3 < report["max_abs_error"]
    assert report["anchor"]["drift_since_profile"] == pytest.approx(0.0, abs=1e-9)
    host = DriftingHost(0.03)
    validate(tmp_path, path, host, anchored=False)
    assert host.ran == ["v1", "v2", "v3"]


def keep_profile_anchor(tmp_path: Path, host: DriftingHost, calibrated: bool = False) -> None:
    """Save the test profile with cal-a's step as ``host`` runs it now (and the calibration set, if asked)."""
    cal = {c.name: c for c in resolve_cases(*load_loop_set(tmp_path / "cal.yaml"))}
    results = tmp_path / "profile-runs" / "cal-a" / "results.json"
    host.run(cal["cal-a"], results.parent)
    kept = anchor_record("cal-a", "cal.yaml", cal["cal-a"].config.model_dump(mode="json"), results, skip_first=1)
    update: dict[str, Any] = {"anchor": kept}
    if calibrated:
        configs = {name: c.config.model_dump(mode="json") for name, c in cal.items()}
        update["calibration"] = CalibrationSet(loop_set="cal.yaml", configs=configs)
    save_profile(profile().model_copy(update=update), tmp_path / "profile.json")


def test_the_anchored_error_is_relative_to_the_models_miss_on_the_anchor_and_the_profile_hour_error_is_not(
    tmp_path: Path,
) -> None:
    path = write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"})
    keep_profile_anchor(tmp_path, DriftingHost(0.0, off={"cal-a": 1.05}))  # the model is 5% fast on the anchor
    report = validate(tmp_path, path, DriftingHost(0.02, off={"cal-a": 1.05}))
    assert report["anchor"]["model_error"] == pytest.approx(1 / 1.05 - 1)
    for e in report["configs"]:  # the model is exact on every validation configuration
        assert e["anchored_error"] == pytest.approx(0.05, abs=2e-3)
        assert e["profile_hour_error"] == pytest.approx(0.0, abs=2e-3)


def test_reuse_keeps_an_anchor_run_only_where_both_its_neighbours_are_reused(tmp_path: Path) -> None:
    path = write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"})
    validate(tmp_path, path, DriftingHost(0.0))
    shutil.rmtree(tmp_path / "runs" / "v2")  # as if the first session died before v2
    host = DriftingHost(0.1)
    report = validate(tmp_path, path, host, reuse=True)
    assert host.ran == ["cal-a", "v2", "cal-a"]  # anchors 2 and 3, beside v2, are run again with it
    assert [r["reused"] for r in report["anchor"]["runs"]] == [True, False, False, True]
    assert all(r["finished_at"] for r in report["anchor"]["runs"])
    v2 = report["configs"][1]
    assert v2["anchor_runs"] == [2, 3] and abs(v2["anchored_error"]) < 2e-2 < abs(v2["error"])


def test_a_profile_that_records_its_calibration_refuses_an_anchor_from_elsewhere(tmp_path: Path) -> None:
    write_sets(tmp_path, None)
    keep_profile_anchor(tmp_path, DriftingHost(0.0), calibrated=True)
    host = DriftingHost(0.0)
    elsewhere = write_sets(tmp_path, {"set": "validate.yaml", "config": "v1"})  # in a set, not calibrated on
    keep_profile_anchor(tmp_path, DriftingHost(0.0), calibrated=True)
    with pytest.raises(RlsimError, match=r"'v1' of .*validate.yaml is not one of the configurations the profile"):
        validate(tmp_path, elsewhere, host)
    assert host.ran == []
    report = validate(tmp_path, write_sets(tmp_path, {"set": "cal.yaml", "config": "cal-a"}), host)
    assert report["anchored"]["configs"] == 3


def test_a_throughput_entry_is_anchored_the_other_way() -> None:
    runs = [{"index": i, "ratio": r, "measured_step_s": r, "phases_s": {}} for i, r in ((1, 1.1), (2, 1.1))]
    entry = {"metric": "rollouts_trained_per_hour", "error": 0.1, "phases_s": {}}
    apply_anchor(entry, runs[0], runs[1], profile_step_s=1.0)
    # A host 10% slow trains 10% fewer rollouts per hour than predicted: the anchored prediction is divided.
    assert entry["anchored_error"] == pytest.approx(0.0) and entry["profile_hour_error"] == pytest.approx(0.0)


def test_a_profile_anchor_with_bad_values_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = write_sets(tmp_path, None)
    keep_profile_anchor(tmp_path, DriftingHost(0.0))
    doc = json.loads((tmp_path / "profile.json").read_text())
    for field, value, named in (
        ("measured_step_s", float("inf"), "anchor.measured_step_s"),
        ("measured_step_s", -1.0, "anchor.measured_step_s"),
        ("phases_s", {"generate": float("nan")}, "anchor.phases_s"),
    ):
        bad = {**doc, "anchor": {**doc["anchor"], field: value}}
        (tmp_path / "profile.json").write_text(json.dumps(bad))
        with pytest.raises(ConfigError, match=named):
            validate(tmp_path, path, DriftingHost(0.0))
    unreadable = {**doc, "anchor": {**doc["anchor"], "run_config": {"steps": -3}}}
    (tmp_path / "profile.json").write_text(json.dumps(unreadable))
    host = DriftingHost(0.0)
    with pytest.raises(ConfigError, match="anchor.run_config"):
        validate(tmp_path, path, host)
    assert host.ran == []


def test_the_profile_checks_its_own_fit_on_its_calibration_runs(tmp_path: Path) -> None:
    # The validation set's three configs stand in for a calibration set here; v2 ran 60% slower than the model.
    path = write_sets(tmp_path, None)
    loop_set, base_dir = load_loop_set(path)
    cases = resolve_cases(loop_set, base_dir)
    runs = tmp_path / "profile-runs"
    host = DriftingHost(0.0, off={"v2": 1.6})
    for case in cases[:2]:  # v3 has no run: left out
        host.run(case, runs / case.name)
    other = cases[2].config.model_copy(update={"reward": cases[2].config.reward.model_copy(update={"batch_size": 3})})
    host.run(replace(cases[2], config=other), runs / "v3")  # a run of other settings under v3's name: left out too
    errors = own_run_errors(cases, profile(), runs, loop_set.warmup_steps, None)
    assert list(errors) == ["v1", "v2"]
    assert errors["v1"] == pytest.approx(0.0, abs=1e-4) and errors["v2"] == pytest.approx(1 / 1.6 - 1, abs=1e-4)
    line = fit_check_line(errors)
    assert "within median 37.5%, worst 37.5%" in line and "misses v2 -38% by more than 20%" in line
    assert "warning" not in fit_check_line({"v1": 0.05, "v2": -0.19})
    # A reward the profile has no entry for is left out, not an error after the loop set's work.
    without = profile().model_copy(update={"runtimes": {}})
    assert own_run_errors(cases, without, runs, loop_set.warmup_steps, None) == {}


def test_a_profile_whose_fit_errors_are_not_finite_is_refused(tmp_path: Path) -> None:
    calibration = CalibrationSet(loop_set="cal.yaml", configs={}, fit_errors={"cal-a": 0.05})
    save_profile(profile().model_copy(update={"calibration": calibration}), tmp_path / "p.json")
    data = json.loads((tmp_path / "p.json").read_text())
    assert load_profile(tmp_path / "p.json").calibration.fit_errors == {"cal-a": 0.05}  # type: ignore[union-attr]
    data["calibration"]["fit_errors"]["cal-a"] = float("nan")
    (tmp_path / "p.json").write_text(json.dumps(data))  # json writes NaN, as a hand-edited file may hold it
    with pytest.raises(RlsimError, match="calibration.fit_errors.cal-a"):
        load_profile(tmp_path / "p.json")


def test_the_anchor_runs_with_its_calibration_sets_warm_up_count_not_the_validation_sets(tmp_path: Path) -> None:
    from rlsim.planner.measure.loop_set import AnchorSpec
    from rlsim.planner.validate.anchor import anchor_from_profile, resolve_anchor

    write_sets(tmp_path, None)
    doc = yaml.safe_load((tmp_path / "cal.yaml").read_text())
    (tmp_path / "cal.yaml").write_text(yaml.safe_dump({**doc, "warmup_steps": 2}))
    anchor = resolve_anchor(AnchorSpec(set="cal.yaml", config="cal-a"), tmp_path, ["v1"], "test")
    assert anchor.warmup_steps == anchor.case.warmup_steps == 2  # the runner records this count for its runs
    results = tmp_path / "profile-runs" / "cal-a" / "results.json"
    DriftingHost(0.0).run(anchor.case, results.parent)
    kept = anchor_record("cal-a", "cal.yaml", anchor.case.config.model_dump(mode="json"), results, skip_first=2)
    assert anchor_from_profile(kept, tmp_path / "profile.json", ["v1"], "test").case.warmup_steps == 2
