"""Scoring runtimes behind one registry; importing this package (or any lookup) registers every built-in backend.

Backends import their heavy dependencies (torch, onnxruntime, the native module, httpx) lazily,
inside their constructors, so importing rlsim.scoring stays cheap and a runtime whose packages are
missing is still listed (``unavailable_reason`` says which package to install). The backend modules
themselves are part of rlsim: a missing one is a broken install and raises.
"""

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

SCORERS.load_builtins()  # importing the package registers every built-in runtime, as it always did

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
