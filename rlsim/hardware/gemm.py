"""The machine's practical compute ceiling per number format: matrix-product rates in G(FL)OP/s.

Every precision is measured the same way: one warm-up, then ``repeats`` products of two ``n x n`` matrices on
``threads`` threads, each ``2 n^3`` operations (a multiply-add is two), the median reported. What differs is the
kernel, one per library that the runtimes of that precision use (``LIBRARIES``):

- ``torch``: ``torch.mm`` in fp32, bf16 or fp16 (the eager/compile runtimes; bf16 on CPU goes to oneDNN's
  AVX512-BF16/AMX kernels), and for int8 ``torch._int_mm`` (int8 x int8 -> int32, oneDNN on CPU);
- ``ort``: ONNX Runtime's CPU ``MatMul`` in fp32 (MLAS: the ort and native runtimes' fp32 graphs), and for int8
  ``MatMulInteger`` on uint8 activations x int8 weights into int32, the MLAS kernel the int8 runtimes' graphs
  run (``quantize_dynamic`` gives uint8 activations and int8 weights; ORT fuses them into
  ``DynamicQuantizeMatMul``/``MatMulIntegerToFloat``, which call the same GEMM; the native engine runs the same
  library). ORT's outputs are bound once (IO binding), as torch writes into a fresh tensor each time. ORT's CPU
  provider has no bf16 ``MatMul`` (ORT 1.32: NOT_IMPLEMENTED), so bf16's ceiling is torch's.

``measure_gemm_gflops`` times one library's kernel (torch's by default for fp32, so the machine fingerprint's rate
stays comparable between profiles); ``best_gemm_gflops`` times every library and reports the fastest, the ceiling
a runtime's throughput is judged against: on an AVX-512 CPU MLAS's fp32 GEMM can run well above ``torch.mm``'s.

Whether this machine can run a precision at all is ``rlsim.hardware.peaks``'s question.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlsim.registry import missing_modules

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# Per precision, the libraries whose GEMM a runtime of it may run, the default (``measure_gemm_gflops``) first.
LIBRARIES = {"fp32": ("torch", "ort"), "bf16": ("torch",), "fp16": ("torch",), "int8": ("ort", "torch")}
_KERNEL_NAMES = {
    ("fp32", "torch"): "torch.mm float32",
    ("fp32", "ort"): "onnxruntime MatMul float32 (MLAS)",
    ("bf16", "torch"): "torch.mm bfloat16",
    ("fp16", "torch"): "torch.mm float16",
    ("int8", "ort"): "onnxruntime MatMulInteger uint8 x int8 -> int32 (MLAS)",
    ("int8", "torch"): "torch._int_mm int8 x int8 -> int32",
}
KERNELS = {precision: _KERNEL_NAMES[(precision, libs[0])] for precision, libs in LIBRARIES.items()}


def measure_gemm_gflops(
    threads: int,
    n: int = 2048,
    repeats: int = 5,
    device: str = "cpu",
    precision: str = "fp32",
    library: str | None = None,
) -> dict[str, Any]:
    """Time ``repeats`` ``(n x n) @ (n x n)`` products in ``precision`` on ``threads`` threads after one warm-up,
    with ``library``'s kernel (None: the precision's first in ``LIBRARIES``).

    Returns ``{"gflops": median, "samples": [...], "n", "threads", "device", "precision", "kernel", "library"}``;
    for int8 ``gflops`` counts integer operations. The median resists one interrupted repeat on a shared machine.
    On ``cuda`` the products run on the GPU (TF32 off, so fp32 is a true fp32 rate) and are synchronised.
    """
    if precision not in LIBRARIES:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(LIBRARIES)}")
    library = library or LIBRARIES[precision][0]
    if library not in LIBRARIES[precision]:
        raise ValueError(f"no {library} kernel for {precision}; valid: {', '.join(LIBRARIES[precision])}")
    if library == "ort" and device != "cpu":
        raise ValueError(f"the ort kernels are ONNX Runtime's CPU ones, not {device}'s")
    product = _PRODUCTS[(precision == "int8", library)](threads, n, device, precision)
    product()  # warm-up: first call allocates and spins up the thread pool (or CUDA context)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        product()
        samples.append(2.0 * n**3 / (time.perf_counter() - t0) / 1e9)
    return {
        "gflops": statistics.median(samples),
        "samples": samples,
        "n": n,
        "threads": threads,
        "device": device,
        "precision": precision,
        "kernel": _KERNEL_NAMES[(precision, library)],
        "library": library,
    }


def best_gemm_gflops(
    threads: int, n: int = 2048, repeats: int = 5, device: str = "cpu", precision: str = "fp32"
) -> dict[str, Any]:
    """``measure_gemm_gflops`` of the fastest library for ``precision`` here, with ``libraries``: each one's
    ``{"gflops", "kernel"}``, or ``{"skipped": reason}`` where it cannot run (not installed, not on this device,
    a kernel this build lacks). Raises ``RuntimeError`` when no library can."""
    rates: dict[str, dict[str, Any]] = {}
    best: dict[str, Any] | None = None
    for library in LIBRARIES.get(precision, ()):
        missing = missing_modules(["onnxruntime", "onnx"] if library == "ort" else ["torch"])
        if missing or (library == "ort" and device != "cpu"):
            why = f"{', '.join(missing)} not installed" if missing else "ONNX Runtime's kernels here are CPU ones"
            rates[library] = {"skipped": why}
            continue
        try:
            out = measure_gemm_gflops(threads, n, repeats, device, precision, library)
        except (RuntimeError, NotImplementedError) as err:  # e.g. a torch build without this kernel
            rates[library] = {"skipped": f"{_KERNEL_NAMES[(precision, library)]}: {str(err).splitlines()[0]}"}
            continue
        rates[library] = {"gflops": out["gflops"], "kernel": out["kernel"]}
        if best is None or out["gflops"] > best["gflops"]:
            best = out
    if best is None:
        raise RuntimeError(f"no {precision} GEMM can run here: {rates}")
    return {**best, "libraries": rates}


def _torch_product(threads: int, n: int, device: str, precision: str) -> Callable[[], None]:
    """One synchronised ``torch.mm`` of two seeded random ``n x n`` matrices in ``precision`` (fp32/bf16/fp16)."""
    import torch

    torch.set_num_threads(threads)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(0)
    dtype = getattr(torch, TORCH_DTYPES[precision])
    a = torch.randn(n, n, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def product() -> None:
        torch.mm(a, b)
        sync()

    return product


def _torch_int8_product(threads: int, n: int, device: str, precision: str) -> Callable[[], None]:
    """One synchronised ``torch._int_mm`` of two seeded random int8 ``n x n`` matrices into int32."""
    import torch

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (n, n), generator=gen, dtype=torch.int8).to(device)
    b = torch.randint(-128, 128, (n, n), generator=gen, dtype=torch.int8).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def product() -> None:
        torch._int_mm(a, b)
        sync()

    return product


def _ort_product(threads: int, n: int, device: str, precision: str) -> Callable[[], None]:
    """One ORT CPU run of ``MatMul`` (fp32) or ``MatMulInteger`` (uint8 input, int8 constant weight) with
    ``threads`` threads, the weight an initializer as in the runtimes' graphs."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    a: Any
    b: Any
    out_dtype: Any
    if precision == "int8":
        a = rng.integers(0, 256, size=(n, n), dtype=np.uint8)
        b = rng.integers(-128, 128, size=(n, n), dtype=np.int8)
        op, kinds, out_dtype = "MatMulInteger", (TensorProto.UINT8, TensorProto.INT32), np.int32
    else:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        op, kinds, out_dtype = "MatMul", (TensorProto.FLOAT, TensorProto.FLOAT), np.float32
    graph = helper.make_graph(
        [helper.make_node(op, ["A", "B"], ["Y"])],
        f"{precision}_gemm",
        [helper.make_tensor_value_info("A", kinds[0], [n, n])],
        [helper.make_tensor_value_info("Y", kinds[1], [n, n])],
        initializer=[numpy_helper.from_array(b, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # opset 17's; the onnx package would stamp its newest, which an older ORT refuses
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return _BoundRun(session, a, ort.OrtValue.ortvalue_from_numpy(np.empty((n, n), dtype=out_dtype)))


class _BoundRun:
    """An ORT session run on IO-bound buffers; holds the buffers, which the binding refers to by address."""

    def __init__(self, session: Any, a: Any, out: Any) -> None:
        self._session, self._a, self._out = session, a, out
        self._binding = session.io_binding()
        self._binding.bind_cpu_input("A", a)
        self._binding.bind_ortvalue_output("Y", out)

    def __call__(self) -> None:
        self._session.run_with_iobinding(self._binding)


# (int8?, library) -> the product builder.
_PRODUCTS: dict[tuple[bool, str], Callable[[int, int, str, str], Callable[[], None]]] = {
    (False, "torch"): _torch_product,
    (True, "torch"): _torch_int8_product,
    (False, "ort"): _ort_product,
    (True, "ort"): _ort_product,
}
