"""Profile files: round trip, version checks, missing runtimes/sections, and the shipped examples."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import rlsim
from rlsim.errors import RlsimError
from rlsim.planner.profile.examples import cpu_profile, gpu_profile
from rlsim.planner.profile.schema import SCHEMA_VERSION, load_profile, save_profile
from tests.helpers.planner_cases import make_profile

SHIPPED = Path(__file__).resolve().parents[2] / "configs" / "profiles"


def test_round_trip(tmp_path: Path) -> None:
    profile = make_profile(per_seq_s=0.01)
    path = save_profile(profile, tmp_path / "p.json")
    assert load_profile(path) == profile


def _edited(tmp_path: Path, **changes: object) -> Path:
    data = make_profile().model_dump(mode="json")
    data.update(changes)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def test_other_rlsim_version_of_the_same_schema_is_read_with_a_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        profile = load_profile(_edited(tmp_path, rlsim_version="0.0.1"))
    assert profile.rlsim_version == "0.0.1" and profile.runtimes == make_profile().runtimes
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert "rlsim 0.0.1" in notes[0] and f"this is rlsim {rlsim.__version__}" in notes[0]


def test_same_version_reads_without_a_note(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        load_profile(save_profile(make_profile(), tmp_path / "p.json"))
    assert caplog.records == []


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RlsimError, match=f"schema version 99.*reads version {SCHEMA_VERSION}.*re-measure"):
        load_profile(_edited(tmp_path, schema_version=99))
    with pytest.raises(RlsimError, match="schema version None"):  # a profile from before schema_version
        load_profile(_edited(tmp_path, schema_version=None))


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(RlsimError, match="does not exist.*rlsim profile"):
        load_profile(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(RlsimError, match="not valid JSON"):
        load_profile(bad)


def test_invalid_field_lists_every_error(tmp_path: Path) -> None:
    data = make_profile().model_dump(mode="json")
    data["runtimes"]["const"]["intercept_s"] = -1
    data["generation"]["max_running"] = 0
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RlsimError, match="2 error") as err:
        load_profile(path)
    assert "intercept_s" in str(err.value) and "max_running" in str(err.value)


def test_missing_runtime_names_the_ones_present() -> None:
    with pytest.raises(RlsimError, match=r"no latency model for runtime 'native'.*const, linear"):
        make_profile().runtime("native")


def test_runtime_without_device_suffix_finds_the_only_match() -> None:
    assert gpu_profile().runtime("native").device == "cpu"
    assert gpu_profile().runtime("compile").device == "cuda"


def test_missing_sections_are_named() -> None:
    partial = make_profile().model_copy(update={"generation": None, "contention": None})
    with pytest.raises(RlsimError, match="no generation, contention model"):
        partial.require_sections()


@pytest.mark.parametrize("name, build", [("example_cpu_2core.json", cpu_profile), ("example_gpu_8x.json", gpu_profile)])
def test_shipped_examples_are_current_and_labelled_illustrative(name: str, build) -> None:  # type: ignore[no-untyped-def]
    # Fails after a schema change until `python -m rlsim.planner.profile.examples DIR` rewrites them; a
    # release bump alone leaves them readable, so their rlsim_version is not compared.
    shipped = load_profile(SHIPPED / name)
    assert shipped.model_copy(update={"rlsim_version": rlsim.__version__}) == build()
    assert shipped.illustrative and any("ILLUSTRATIVE" in note for note in shipped.notes)


def test_a_measured_runtime_that_pads_nothing_is_marked_so_from_its_registry_entry(monkeypatch, tmp_path) -> None:
    """``vllm`` schedules rows itself (``RuntimeInfo.pads`` false): its section says ``pads: false``, so the
    simulators cost its batches in real tokens; eager's stays padded; a re-fit keeps what was stored."""
    from rlsim.planner.measure import build_profile as building
    from rlsim.planner.measure.build_profile import ProfileConfig, build_profile
    from rlsim.planner.profile.schema import LatencySample

    def fake_measure(runtime, reward_model, device, grid, on_cell=None, quiet=None, **kw):  # type: ignore[no-untyped-def]
        cells = [(b, n) for b in grid.batch_sizes for n in grid.lengths]
        return [LatencySample(batch=b, padded_tokens=b * n, latency_s=0.001 + 1e-4 * b + 1e-5 * b * n, units=2)
                for b, n in cells for _ in range(2)], 512  # fmt: skip

    monkeypatch.setattr(building, "measure_runtime", fake_measure)  # patched where it is called
    config = ProfileConfig(hardware_kind="test", runtimes=["eager", "vllm", "vllm-bf16"])
    built = build_profile(config, tmp_path)
    pads = {name: model.pads for name, model in built.profile.runtimes.items()}
    assert pads == {"eager": True, "vllm": False, "vllm-bf16": False}  # bf16 on the same runner (issue 30 item 5)
    again = build_profile(config, tmp_path, scorers_from=built.profile)
    assert again.profile.runtimes["vllm"].pads is False and "re-fitted" in " ".join(again.measured)


def test_a_runtime_added_to_a_measured_profile_takes_its_median_in_loop_factor(monkeypatch, tmp_path) -> None:
    """``rlsim profile`` timing one runtime with ``--fill-from`` a measured profile and no loop run: the new
    runtime gets the median of that profile's measured in-loop factors, said in ``unmeasured``."""
    from rlsim.planner.measure import build_profile as building
    from rlsim.planner.measure.build_profile import ProfileConfig, build_profile
    from rlsim.planner.profile.schema import LatencySample

    def fake_measure(runtime, reward_model, device, grid, on_cell=None, quiet=None, **kw):  # type: ignore[no-untyped-def]
        return [LatencySample(batch=b, padded_tokens=b * n, latency_s=0.001 + 1e-4 * b + 1e-5 * b * n, units=2)
                for b in grid.batch_sizes for n in grid.lengths for _ in range(2)], 512  # fmt: skip

    monkeypatch.setattr(building, "measure_runtime", fake_measure)  # patched where it is called
    base = build_profile(ProfileConfig(hardware_kind="base", runtimes=["eager", "ort"]), tmp_path).profile
    factors = {"eager": (1.2, 0.01), "ort": (1.6, 0.03)}
    base = base.model_copy(update={"runtimes": {
        k: m.model_copy(update={"in_loop_factor": factors[k][0], "call_overhead_s": factors[k][1],
                                "in_loop_factor_measured": True})
        for k, m in base.runtimes.items()
    }})  # fmt: skip
    added = build_profile(ProfileConfig(hardware_kind="base", runtimes=["vllm"]), tmp_path, fill_from=base)
    vllm = added.profile.runtimes["vllm"]
    assert (vllm.in_loop_factor, vllm.call_overhead_s, vllm.in_loop_factor_measured) == pytest.approx((1.4, 0.02, 0))
    assert added.profile.runtimes["eager"].in_loop_factor == 1.2  # copied as it was
    assert any("runtime vllm: in-loop factor not measured" in u for u in added.unmeasured)
