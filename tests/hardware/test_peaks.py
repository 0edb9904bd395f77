"""Peak rates per precision: which this machine lacks (and why), how they are measured and summarized."""

from __future__ import annotations

import pytest

from rlsim.hardware.cpu import cpu_flags
from rlsim.hardware.gemm import measure_gemm_gflops
from rlsim.hardware.peaks import measure_peaks, peak_skip_reason, summarize_peaks


def test_a_precision_the_machine_lacks_is_skipped_with_the_reason() -> None:
    avx2_only = frozenset({"avx", "avx2", "fma"})
    reason = peak_skip_reason("bf16", "cpu", avx2_only)
    assert reason is not None and "avx512_bf16" in reason and "amx_bf16" in reason and "emulate" in reason
    assert peak_skip_reason("bf16", "cpu", frozenset({"avx512_bf16"})) is None
    assert peak_skip_reason("bf16", "cpu", frozenset({"amx_bf16"})) is None
    assert "CUDA only" in (peak_skip_reason("fp16", "cpu") or "")
    assert "CPU MatMulInteger" in (peak_skip_reason("int8", "cuda") or "")
    assert peak_skip_reason("int8", "cpu", avx2_only) is None  # MLAS has AVX2 int8 kernels; VNNI only speeds them


def test_measure_peaks_records_skips_instead_of_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rlsim.hardware.peaks.peak_skip_reason", lambda p, d: "no fp16 here" if p == "fp16" else None)
    calls = []

    def fake(threads, device, precision):
        calls.append(precision)
        return {"gflops": 400.0, "precision": precision}

    peaks = measure_peaks(["bf16", "fp16", "int8"], threads=2, device="cpu", measure=fake)
    assert calls == ["bf16", "int8"]
    assert peaks["fp16"] == {"skipped": "no fp16 here"} and peaks["int8"]["gflops"] == 400.0


def test_peaks_are_averaged_over_the_runs_before_and_after_the_grid() -> None:
    runs = [
        {"gflops": 100.0, "peaks": {"int8": {"gflops": 500.0, "kernel": "k"}, "bf16": {"skipped": "no flag"}}},
        {"gflops": 120.0, "peaks": {"int8": {"gflops": 700.0, "kernel": "k"}, "bf16": {"skipped": "no flag"}}},
    ]
    peaks = summarize_peaks(runs)
    assert peaks["fp32"]["gflops"] == pytest.approx(110.0) and peaks["fp32"]["runs"] == [100.0, 120.0]
    assert peaks["int8"] == {"gflops": pytest.approx(600.0), "runs": [500.0, 700.0], "kernel": "k"}
    assert peaks["bf16"] == {"skipped": "no flag"}


def test_int8_rate_is_measured_with_onnxruntime() -> None:
    pytest.importorskip("onnxruntime")
    out = measure_gemm_gflops(threads=1, n=128, repeats=3, precision="int8")
    assert out["gflops"] > 0 and len(out["samples"]) == 3 and "MatMulInteger" in out["kernel"]


def test_bf16_rate_is_measured_where_the_cpu_has_it() -> None:
    reason = peak_skip_reason("bf16", "cpu", cpu_flags())
    if reason:
        pytest.skip(reason)
    out = measure_gemm_gflops(threads=1, n=128, repeats=3, precision="bf16")
    assert out["gflops"] > 0 and out["precision"] == "bf16"


def test_unknown_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown precision 'int4'"):
        measure_gemm_gflops(threads=1, n=16, repeats=1, precision="int4")


def test_the_peak_is_the_fastest_library_and_each_one_is_recorded() -> None:
    from rlsim.hardware.gemm import best_gemm_gflops

    pytest.importorskip("onnxruntime")
    out = best_gemm_gflops(threads=1, n=128, repeats=3, precision="fp32")
    rates = out["libraries"]
    assert set(rates) == {"torch", "ort"} and all(r["gflops"] > 0 for r in rates.values())
    assert (
        out["gflops"] == max(r["gflops"] for r in rates.values()) and rates[out["library"]]["kernel"] == out["kernel"]
    )
    assert "MLAS" in rates["ort"]["kernel"] and "torch.mm" in rates["torch"]["kernel"]
    # The default single-library rate is still torch's for fp32 (what machine fingerprints record).
    assert measure_gemm_gflops(threads=1, n=64, repeats=1)["library"] == "torch"


def test_a_library_that_cannot_run_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlsim.hardware import gemm

    def broken(threads: int, n: int, device: str, precision: str) -> object:
        raise RuntimeError("_int_mm: not compiled for this CPU\nmore")

    monkeypatch.setitem(gemm._PRODUCTS, (True, "torch"), broken)
    pytest.importorskip("onnxruntime")
    out = gemm.best_gemm_gflops(threads=1, n=64, repeats=1, precision="int8")
    assert out["library"] == "ort" and out["libraries"]["torch"] == {
        "skipped": "torch._int_mm int8 x int8 -> int32: _int_mm: not compiled for this CPU"
    }
    with pytest.raises(ValueError, match="no ort kernel for bf16"):
        gemm.measure_gemm_gflops(threads=1, n=16, repeats=1, precision="bf16", library="ort")
    with pytest.raises(ValueError, match="ONNX Runtime's CPU ones"):
        gemm.measure_gemm_gflops(threads=1, n=16, repeats=1, precision="fp32", library="ort", device="cuda")


def test_the_summary_keeps_each_librarys_rate() -> None:
    torch_ort = {"torch": {"gflops": 200.0, "kernel": "t"}, "ort": {"gflops": 450.0, "kernel": "o"}}
    runs = [
        {"gflops": 450.0, "kernel": "o", "libraries": torch_ort},
        {"gflops": 470.0, "kernel": "o", "libraries": {**torch_ort, "ort": {"gflops": 470.0, "kernel": "o"}}},
    ]
    peaks = summarize_peaks(runs)
    assert peaks["fp32"]["gflops"] == pytest.approx(460.0) and peaks["fp32"]["kernel"] == "o"
    assert peaks["fp32"]["libraries"] == {
        "torch": {"gflops": 200.0, "kernel": "t"},
        "ort": {"gflops": 460.0, "kernel": "o"},
    }
