"""The machine's practical compute ceiling per number format: matrix-product rates in G(FL)OP/s.

Every precision is measured the same way: one warm-up, then ``repeats`` products of two ``n x n`` matrices on
``threads`` threads, each ``2 n^3`` operations (a multiply-add is two), the median reported. What differs is the
kernel, chosen to be the one the runtimes of that precision use:

- ``fp32``, ``bf16``, ``fp16``: ``torch.mm`` in that dtype (the eager/compile runtimes are torch; bf16 on CPU goes to
  oneDNN's AVX512-BF16/AMX kernels);
- ``int8``: ONNX Runtime's ``MatMulInteger`` on uint8 activations x int8 weights into int32, the MLAS kernel that
  the int8 runtimes' graphs run (``quantize_dynamic`` gives uint8 activations and int8 weights; ORT fuses them
  into ``DynamicQuantizeMatMul``/``MatMulIntegerToFloat``, which call the same GEMM; the native engine runs the
  same library). Its output is bound once (IO binding), as torch writes into a fresh tensor each time.

Whether this machine can run a precision at all is ``rlsim.bench.peaks``'s question.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
KERNELS = {
    "fp32": "torch.mm float32",
    "bf16": "torch.mm bfloat16",
    "fp16": "torch.mm float16",
    "int8": "onnxruntime MatMulInteger uint8 x int8 -> int32 (MLAS)",
}


def measure_gemm_gflops(
    threads: int, n: int = 2048, repeats: int = 5, device: str = "cpu", precision: str = "fp32"
) -> dict[str, Any]:
    """Time ``repeats`` ``(n x n) @ (n x n)`` products in ``precision`` on ``threads`` threads after one warm-up.

    Returns ``{"gflops": median, "samples": [...], "n", "threads", "device", "precision", "kernel"}``; for int8
    ``gflops`` counts integer operations. The median resists one interrupted repeat on a shared machine.
    On ``cuda`` the products run on the GPU (TF32 off, so fp32 is a true fp32 rate) and are synchronised.
    """
    if precision not in KERNELS:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(KERNELS)}")
    product = _int8_product(threads, n) if precision == "int8" else _torch_product(threads, n, device, precision)
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
        "kernel": KERNELS[precision],
    }


def _torch_product(threads: int, n: int, device: str, precision: str) -> Callable[[], None]:
    """One synchronised ``torch.mm`` of two seeded random ``n x n`` matrices in ``precision``."""
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


def _int8_product(threads: int, n: int) -> Callable[[], None]:
    """One ``MatMulInteger`` run (uint8 input, int8 constant weight) in an ORT session with ``threads`` threads."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(n, n), dtype=np.uint8)
    b = rng.integers(-128, 128, size=(n, n), dtype=np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["Y"])],
        "int8_gemm",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [n, n])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, [n, n])],
        initializer=[numpy_helper.from_array(b, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # opset 17's; the onnx package would stamp its newest, which an older ORT refuses
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return _BoundRun(session, a, ort.OrtValue.ortvalue_from_numpy(np.empty((n, n), dtype=np.int32)))


class _BoundRun:
    """An ORT session run on IO-bound buffers; holds the buffers, which the binding refers to by address."""

    def __init__(self, session: Any, a: Any, out: Any) -> None:
        self._session, self._a, self._out = session, a, out
        self._binding = session.io_binding()
        self._binding.bind_cpu_input("A", a)
        self._binding.bind_ortvalue_output("Y", out)

    def __call__(self) -> None:
        self._session.run_with_iobinding(self._binding)
