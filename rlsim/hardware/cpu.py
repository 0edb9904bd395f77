"""The CPU's feature flags, read from /proc/cpuinfo, and the ones that give native bf16 matrix products."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

# Any of these flags gives the CPU native bf16 matrix products (AVX512-BF16 dot products or AMX tiles).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@lru_cache(maxsize=1)
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (Linux); empty where /proc/cpuinfo is not readable."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()
