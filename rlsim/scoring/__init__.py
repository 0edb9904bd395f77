"""Scoring runtimes behind one registry; importing this package registers every built-in backend.

Backends import their heavy dependencies (torch, onnxruntime, the native module, httpx) lazily,
inside their constructors, so importing rlsim.scoring stays cheap and a runtime whose packages are
missing is still listed (``unavailable_reason`` says which package to install). The backend modules
themselves are part of rlsim: a missing one is a broken install and raises.
"""

from importlib import import_module

from rlsim.scoring.base import (
    SCORERS,
    RuntimeInfo,
    Scorer,
    ScorerSettings,
    ServerScorer,
    TokenScorer,
    expand_runtimes,
    make_scorer,
    register_scorer,
    runtime_names,
    unavailable_reason,
)

# Registration order is the order ``all`` lists runtimes in: the reference first, http last, then
# the precision variants (bf16/fp16 and calibrated int8), which ``all`` lists only where they can run.
for _module in (
    "torch_scorers",
    "ort_scorer",
    "native_scorer",
    "http_scorer",
    "half_precision_scorers",
    "int8_static_scorers",
):
    import_module(f"rlsim.scoring.{_module}")

__all__ = [
    "SCORERS",
    "RuntimeInfo",
    "Scorer",
    "ScorerSettings",
    "ServerScorer",
    "TokenScorer",
    "expand_runtimes",
    "make_scorer",
    "register_scorer",
    "runtime_names",
    "unavailable_reason",
]
