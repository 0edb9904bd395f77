"""The number format each scoring runtime computes in, so a benchmark measures the peaks its runtimes need.

The peaks themselves (what a precision's fastest GEMM does on this machine, or why it has none) are hardware
figures: ``rlsim.hardware.peaks``. This is the part that asks the scoring registry.
"""

from __future__ import annotations

from collections.abc import Iterable

from rlsim.hardware.peaks import PEAK_PRECISIONS
from rlsim.scoring import SCORERS  # the package: importing it registers every built-in runtime


def runtime_precision(runtime: str, server_runtime: str = "ort") -> str | None:
    """The number format ``runtime`` computes in (``http``: its server's runtime's); None for a name not
    registered in this process (recorded results of a plug-in runtime), or a reward that does no model
    arithmetic (a Python verifier, a code sandbox): it then has no peak to compare with."""
    if runtime not in SCORERS or SCORERS.info(runtime).kind in ("function", "sandbox"):
        return None
    precision = SCORERS.info(runtime).precision
    if precision is None and server_runtime in SCORERS:
        precision = SCORERS.info(server_runtime).precision
    return precision or "fp32"


def needed_precisions(runtimes: Iterable[str], server_runtime: str = "ort") -> list[str]:
    """The precisions other than fp32 that ``runtimes`` compute in, in ``PEAK_PRECISIONS`` order."""
    used = {runtime_precision(r, server_runtime) for r in runtimes}
    return [p for p in PEAK_PRECISIONS if p in used and p != "fp32"]
