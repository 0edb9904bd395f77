"""The machine's practical compute ceiling: fp32 matrix-product rate with torch, in GFLOP/s."""

from __future__ import annotations

import statistics
import time
from typing import Any


def measure_gemm_gflops(threads: int, n: int = 2048, repeats: int = 5, device: str = "cpu") -> dict[str, Any]:
    """Time ``repeats`` fp32 ``(n x n) @ (n x n)`` products on ``threads`` threads after one warm-up.

    Returns ``{"gflops": median, "samples": [...], "n": n, "threads": threads, "device": device}``;
    each product is ``2 n^3`` FLOPs. The median resists one interrupted repeat on a shared machine.
    On ``cuda`` the products run on the GPU (TF32 off, so it is a true fp32 rate) and are synchronised.
    """
    import torch

    torch.set_num_threads(threads)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen, dtype=torch.float32).to(device)
    b = torch.randn(n, n, generator=gen, dtype=torch.float32).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    torch.mm(a, b)  # warm-up: first call allocates and spins up the thread pool (or CUDA context)
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        sync()
        samples.append(2.0 * n**3 / (time.perf_counter() - t0) / 1e9)
    return {"gflops": statistics.median(samples), "samples": samples, "n": n, "threads": threads, "device": device}
