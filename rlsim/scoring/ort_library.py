"""Where the native engine's pieces are: the ONNX Runtime C library, ``rlsim._native`` and its benchmark.

The native engine never links ONNX Runtime; it ``dlopen``s a ``libonnxruntime.so`` found here at
run time (see ``native_engine/src/ort_runtime.h`` for why). Search order for the library:

1. a path the user gives (``ScorerSettings.ort_path``, ``--ort-library``);
2. ``$ORT_ROOT/lib`` or ``$ONNXRUNTIME_ROOT/lib`` (an ONNX Runtime release folder);
3. the installed ``onnxruntime`` pip package, which ships ``onnxruntime/capi/libonnxruntime.so.<version>``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
from pathlib import Path
from types import ModuleType

from rlsim.errors import RlsimError

ROOT_VARS = ("ORT_ROOT", "ONNXRUNTIME_ROOT")
BENCH_NAME = "rlsim_native_bench"
NOT_BUILT = "native engine is not built; run `make native` (or `pip install -e .`)"


def find_ort_library(user_path: str | os.PathLike[str] | None = None) -> Path:
    """The ``libonnxruntime.so`` the native engine should load, as a resolved path.

    Raises ``RlsimError`` naming the fix when the given path, an ``ORT_ROOT`` folder, or the
    installed package holds no library.
    """
    if user_path:
        path = Path(user_path).expanduser()
        if not path.is_file():
            raise RlsimError(
                f"ONNX Runtime library {path} does not exist; pass the path of a libonnxruntime.so "
                "(or pass none to use the one in the installed onnxruntime package)"
            )
        return path.resolve()
    for var in ROOT_VARS:
        root = os.environ.get(var)
        if root:
            found = _library_in(Path(root).expanduser() / "lib")
            if found is None:
                raise RlsimError(
                    f"{var}={root} has no lib/libonnxruntime.so*; point {var} at an ONNX Runtime "
                    f"release folder (with include/ and lib/) or unset it"
                )
            return found
    capi = _package_capi_dir()
    found = _library_in(capi) if capi else None
    if found is None:
        raise RlsimError(
            "no ONNX Runtime library found: `pip install onnxruntime` (its wheel ships "
            "capi/libonnxruntime.so), set ORT_ROOT to an ONNX Runtime release folder, or pass the "
            "library's path (settings ort_path)"
        )
    return found


def _package_capi_dir() -> Path | None:
    """``onnxruntime/capi`` of the installed package, found without importing it (that is slow)."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "capi"


def _library_in(folder: Path) -> Path | None:
    """``libonnxruntime.so`` in ``folder`` (or the newest ``libonnxruntime.so.X.Y.Z``), resolved."""
    if not folder.is_dir():
        return None
    plain = folder / "libonnxruntime.so"
    if plain.is_file():
        return plain.resolve()
    versioned = [p for p in folder.glob("libonnxruntime.so.*") if p.is_file()]
    if not versioned:
        return None
    return max(versioned, key=lambda p: _version_key(p.name)).resolve()


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name.split(".so", 1)[1]))


def load_native() -> ModuleType:
    """Import ``rlsim._native``; a missing or broken build becomes one ``RlsimError`` naming the fix."""
    try:
        return importlib.import_module("rlsim._native")
    except ImportError as err:
        raise RlsimError(f"{NOT_BUILT} (import failed: {err})") from err


def native_bench_path() -> Path:
    """The standalone C++ benchmark ``rlsim_native_bench``.

    It is installed next to the compiled module (in the wheel, or site-packages for an editable
    install); a tree built but not installed still has it under ``build/<wheel tag>/``.
    """
    candidates: list[Path] = []
    spec = _native_spec()
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / BENCH_NAME)
    repo_build = Path(__file__).resolve().parents[2] / "build"
    candidates.extend(sorted(repo_build.glob(f"*/{BENCH_NAME}")))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise RlsimError(f"{BENCH_NAME} not found; {NOT_BUILT}")


def _native_spec() -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec("rlsim._native")
    except (ImportError, ValueError):
        return None
