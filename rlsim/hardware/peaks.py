"""Peak rates per number format, so each runtime's throughput is also judged against its own precision's ceiling.

A bf16 or int8 runtime that does three times fp32 eager's work may still be far below what its kernels can do,
and the fp32 GEMM rate cannot say that. So for every precision a benchmark's runtimes compute in, the GEMM worker
measures that precision's matrix product (``rlsim.hardware.gemm``: same size, repeats and median as fp32) beside the
fp32 one, in every library a runtime of it may run (torch, ONNX Runtime's MLAS) and keeps the fastest: the peak
is the machine's best GEMM for the precision, not torch's alone (MLAS's fp32 GEMM ran 2.3x ``torch.mm``'s at
n 2048 on 2 threads of this project's AVX-512 CPU on 2026-12-04, which had put the ort and native cells above 1
of a torch-only "peak"). A precision this machine cannot run is skipped with the reason, not measured slow:
torch emulates bf16 without AVX512-BF16 or AMX, fp16 is CUDA only, and int8 is measured on CPU (MLAS's and
torch's kernels).

``peak_fraction`` is the arithmetic: model FLOPs of a pass (``rlsim.hardware.flops``, padding excluded) / its wall
seconds / the peak rate. For int8 runtimes the whole forward's FLOPs are set against the int8 rate, though their
attention, softmax and norms stay in fp32: the fraction says how far the runtime is from an all-int8 ceiling.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from rlsim.hardware.cpu import BF16_CPU_FLAGS, cpu_flags
from rlsim.hardware.gemm import KERNELS, best_gemm_gflops
from rlsim.registry import missing_modules

PEAK_PRECISIONS = tuple(KERNELS)


def peak_skip_reason(precision: str, device: str, flags: frozenset[str] | None = None) -> str | None:
    """Why this machine has no ``precision`` peak on ``device`` (``flags``: the CPU's; read when None), or None."""
    if precision == "bf16" and device == "cpu":
        have = cpu_flags() if flags is None else flags
        if not any(f in have for f in BF16_CPU_FLAGS):
            return (
                f"no bf16 GEMM peak: this CPU lacks {' and '.join(BF16_CPU_FLAGS)} (/proc/cpuinfo), so torch would "
                "emulate bf16, slower than fp32; the bf16 runtimes are refused here too"
            )
    if precision == "fp16" and device != "cuda":
        return "no fp16 GEMM peak: fp16 runs on CUDA only (use --device cuda on a GPU machine)"
    if precision == "int8":
        if device != "cpu":
            return f"no int8 GEMM peak on {device}: the int8 peak is ONNX Runtime's CPU MatMulInteger"
        missing = missing_modules(["onnxruntime", "onnx"])
        if missing:
            return f"no int8 GEMM peak: {', '.join(missing)} not installed (pip install onnxruntime onnx)"
    return None


def measure_peaks(
    precisions: Sequence[str], threads: int, device: str, measure: Callable[..., dict[str, Any]] = best_gemm_gflops
) -> dict[str, dict[str, Any]]:
    """``{precision: best_gemm_gflops(...) or {"skipped": reason}}`` for each of ``precisions``: the fastest
    library's rate, each library's beside it."""
    out = {}
    for precision in precisions:
        reason = peak_skip_reason(precision, device)
        out[precision] = {"skipped": reason} if reason else measure(threads, device=device, precision=precision)
    return out


def summarize_peaks(gemm_runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per precision over the GEMM runs (before and after the grid): ``{"gflops": mean, "runs": [...], "kernel",
    "libraries"}``, or ``{"skipped": reason}``. fp32 is each run itself, the other precisions its ``peaks``."""
    by_precision: dict[str, list[dict[str, Any]]] = {"fp32": list(gemm_runs)}
    for run in gemm_runs:
        for precision, rate in (run.get("peaks") or {}).items():
            by_precision.setdefault(precision, []).append(rate)
    out = {}
    for precision, rates in by_precision.items():
        skipped = [r["skipped"] for r in rates if "skipped" in r]
        if skipped:
            out[precision] = {"skipped": skipped[0]}
            continue
        out[precision] = {
            "gflops": statistics.fmean(r["gflops"] for r in rates),
            "runs": [r["gflops"] for r in rates],
            "kernel": rates[0].get("kernel", KERNELS.get(precision)),
        }
        libraries = _libraries(rates)
        if libraries:
            out[precision]["libraries"] = libraries
    return out


def _libraries(rates: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each library's mean rate over the runs (``best_gemm_gflops``'s ``libraries``), or why it was skipped."""
    by_library: dict[str, list[dict[str, Any]]] = {}
    for rate in rates:
        for library, one in (rate.get("libraries") or {}).items():
            by_library.setdefault(library, []).append(one)
    out: dict[str, dict[str, Any]] = {}
    for library, ones in by_library.items():
        measured = [x for x in ones if "gflops" in x]
        if measured:
            out[library] = {"gflops": statistics.fmean(x["gflops"] for x in measured), "kernel": measured[0]["kernel"]}
        else:
            out[library] = {"skipped": ones[0]["skipped"]}
    return out


def peak_fraction(flops: float, wall_s: float, peak_gflops: float) -> float:
    """Achieved rate as a fraction of a peak: ``flops / wall_s`` (FLOP/s) over ``peak_gflops`` x 1e9."""
    return flops / wall_s / (peak_gflops * 1e9)
