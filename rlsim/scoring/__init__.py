"""Scoring runtimes behind one registry; importing this package registers every backend.

Backends import their heavy dependencies (torch, onnxruntime, the native module, httpx) lazily,
inside their constructors, so importing rlsim.scoring stays cheap.
"""

from importlib import import_module

from rlsim.scoring.base import (
    ALL_RUNTIMES,
    SCORERS,
    Scorer,
    ScorerSettings,
    expand_runtimes,
    make_scorer,
    register_scorer,
)

for _module in ("torch_scorers", "ort_scorer", "native_scorer", "http_scorer"):
    try:
        import_module(f"rlsim.scoring.{_module}")
    except ModuleNotFoundError as _err:  # a backend file not present in this checkout
        if _err.name != f"rlsim.scoring.{_module}":
            raise

__all__ = ["ALL_RUNTIMES", "SCORERS", "Scorer", "ScorerSettings", "expand_runtimes", "make_scorer", "register_scorer"]
