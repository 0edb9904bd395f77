"""Type stub for the compiled module ``rlsim._native`` (native_engine/src/python_module.cc)."""

import os
from typing import Any

import numpy as np
import numpy.typing as npt

class Engine:
    """One ONNX Runtime session over a reward model: int64 ``(batch, seq)`` ids and mask in,
    float32 ``(batch,)`` rewards out. ONNX Runtime is ``dlopen``ed from ``ort_library``.

    Raises ``FileNotFoundError`` (missing model or library file), ``ValueError`` (bad setting) or
    ``RuntimeError`` (a graph that is not a one-label reward model, an unloadable library, a second
    library in one process, a device the library cannot serve).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        ort_library: str | os.PathLike[str],
        intra_op_threads: int = 0,
        inter_op_threads: int = 1,
        spinning: bool = True,
        optimization: str = "all",
        device: str = "cpu",
        execution_mode: str = "sequential",
    ) -> None: ...
    def run(self, input_ids: npt.ArrayLike, attention_mask: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Score one batch. Both arrays int64 of equal shape ``(batch, seq)``; an empty batch gives an
        empty result. Raises ``ValueError`` on bad input, ``RuntimeError`` if ONNX Runtime fails.
        Releases the GIL while ONNX Runtime runs, so other Python threads (and other runs) proceed."""
        ...
    @property
    def input_names(self) -> list[str]: ...
    @property
    def output_names(self) -> list[str]:
        """All model outputs; the first is the reward."""
        ...
    @property
    def ort_version(self) -> str: ...
    @property
    def ort_library(self) -> str: ...
    @property
    def model_path(self) -> str: ...
    @property
    def options(self) -> dict[str, Any]: ...
    @property
    def active_runs(self) -> int:
        """Calls now inside ONNX Runtime's Run, over all threads."""
        ...
