"""Machine fingerprints: a profile of other hardware gets one warning line, a matching one none."""

from __future__ import annotations

import pytest

from rlsim.fingerprint import fingerprint_differences, gpu_family, machine_fingerprint, mismatch_warning
from rlsim.planner.profile.machine_check import check_cluster, check_here
from rlsim.planner.search.plan import execute, prepare
from rlsim.planner.spec.cluster import NodeSpec, PlanConfig
from tests.helpers.planner_cases import fixed_workload, make_profile, placement

HERE = {
    "cpu_model": "AMD EPYC 7B13",
    "cpu_flags": ["avx", "avx2", "fma"],
    "cores": 2,
    "gpus": [],
    "gemm_gflops": {"cpu_fp32_n1024_2t": 100.0},
    "versions": {"torch": "2.13.0+cpu"},
}


def test_this_machine_is_described() -> None:
    fp = machine_fingerprint({"cpu_fp32_n1024_2t": 1.0})
    assert fp["cores"] >= 1 and fp["cpu_model"] and "rlsim" in fp["versions"]
    assert fp["gemm_gflops"] == {"cpu_fp32_n1024_2t": 1.0}
    assert fingerprint_differences(fp, machine_fingerprint()) == []  # GEMM only compared when both have it


def test_match_gives_no_warning() -> None:
    profile = make_profile().model_copy(update={"machine": dict(HERE, host="elsewhere")})
    assert check_here(profile, "p.json", dict(HERE, versions={"torch": "2.13.1+cpu"})) is None


@pytest.mark.parametrize(
    "change,words",
    [
        ({"cpu_flags": ["avx", "avx2", "fma", "avx512f", "avx512_vnni"]}, "here only: avx512_vnni avx512f"),
        ({"cpu_model": "Intel Xeon 8481C"}, "CPU 'AMD EPYC 7B13' vs 'Intel Xeon 8481C'"),
        ({"cores": 4}, "cores 2 vs 4"),
        ({"gemm_gflops": {"cpu_fp32_n1024_2t": 150.0}}, "GEMM cpu_fp32_n1024_2t 100 vs 150"),
        ({"versions": {"torch": "2.12.0+cpu"}}, "torch 2.13.0+cpu vs 2.12.0+cpu"),
    ],
)
def test_mismatch_names_what_differs_and_how_to_remeasure(change: dict, words: str) -> None:
    profile = make_profile().model_copy(update={"machine": HERE})
    warning = check_here(profile, "cpu.json", {**HERE, **change})
    assert warning is not None and words in warning
    assert "rlsim profile configs/profiles/measure_cpu_2core.yaml" in warning and "min" in warning
    assert "\n" not in warning
    # Only the GEMM rate moved: the same CPU at another speed is said as such, not as other hardware.
    assert ("other hardware of the same model, or a shared host" in warning) == ("gemm_gflops" in change)


def test_profile_without_fingerprint_says_so() -> None:
    warning = check_here(make_profile(), "old.json", HERE)
    assert warning is not None and "records no machine" in warning


def test_gpu_families_match_across_spellings() -> None:
    assert gpu_family("NVIDIA H100 80GB HBM3") == gpu_family("H100-SXM5-80GB") == "H100"
    assert gpu_family("NVIDIA A100-SXM4-80GB") == "A100"


def test_cluster_gpu_mismatch_warns() -> None:
    profile = make_profile(device="cuda").model_copy(update={"machine": {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}})
    h100 = NodeSpec(count=2, cores=64, gpus=8, kind="test-kind", gpu_model="H100-SXM5-80GB")
    a100 = h100.model_copy(update={"gpu_model": "A100-SXM4-80GB"})
    assert check_cluster(profile, "h.json", h100) is None
    warning = check_cluster(profile, "h.json", a100)
    assert warning is not None and "H100 vs the cluster's A100" in warning and "gpu_profile.sh" in warning


def test_plan_reports_the_warning(tmp_path) -> None:
    profile = make_profile().model_copy(update={"machine": {**HERE, "cpu_model": "Some Other CPU"}})
    path = tmp_path / "p.json"
    from rlsim.planner.profile.schema import save_profile

    save_profile(profile, path)
    config = PlanConfig(
        nodes=NodeSpec(count=1, cores=2, kind="test-kind", cpu_model="AMD EPYC 7B13"),
        profiles={"test-kind": str(path)},
        workload=fixed_workload(),
        placement=placement(),
    )
    outcome = execute(prepare(config, path))
    assert sum("measured on other hardware" in w for w in outcome.warnings) == 1
    same = config.model_copy(update={"nodes": config.nodes.model_copy(update={"cpu_model": "Some Other CPU"})})
    assert not any("other hardware" in w for w in execute(prepare(same, path)).warnings)


def test_no_differences_no_line() -> None:
    assert mismatch_warning("p", [], gpu=False) is None


def test_nvidia_smi_line_of_a_real_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    """The line nvidia-smi printed on an H200 machine (2026-11-30): parsed, and flagged against the H100 profile."""
    import subprocess

    import rlsim.fingerprint as fingerprint

    line = "NVIDIA H200, 580.159.04, 143771\n"
    monkeypatch.setattr(fingerprint.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(
        fingerprint.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=line, stderr="")
    )
    here = machine_fingerprint()
    assert here["gpus"] == [{"name": "NVIDIA H200", "driver": "580.159.04", "memory_mib": 143771.0}]
    h100 = make_profile(device="cuda").model_copy(update={"machine": {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}})
    node = NodeSpec(count=1, cores=16, gpus=1, kind="test-kind", gpu_model=here["gpus"][0]["name"])
    warning = check_cluster(h100, "h100.json", node)
    assert warning is not None and "H100 vs the cluster's H200" in warning
