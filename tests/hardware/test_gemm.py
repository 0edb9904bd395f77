"""The GEMM rate that throughput is judged against."""

from __future__ import annotations

import pytest

from rlsim.hardware.gemm import measure_gemm_gflops


def test_cpu_rate_is_measured() -> None:
    # A small product keeps this quick; the figures only have to be real, positive measurements.
    out = measure_gemm_gflops(threads=1, n=128, repeats=3)
    assert out["gflops"] > 0 and len(out["samples"]) == 3 and out["device"] == "cpu"
    assert min(out["samples"]) <= out["gflops"] <= max(out["samples"])


@pytest.mark.gpu
def test_cuda_rate_is_measured() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    out = measure_gemm_gflops(threads=1, n=1024, repeats=3, device="cuda")
    assert out["gflops"] > 0 and out["device"] == "cuda"
