"""Moving policy weights from the trainer to the generator: numpy arrays in, a safetensors folder out.

Weights travel as plain numpy arrays (Ray's object store moves them between nodes without copies on
one node); the generator's side writes them to a local folder its engine reloads from.
"""

from __future__ import annotations

import shutil
import weakref
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from rlsim.paths import process_folder


class WeightsFolder:
    """A private temporary folder holding the latest weights as ``model.safetensors``, made on the first
    ``write`` (a worker whose weights never move makes none) and removed on ``close``, or when the object is
    collected or the interpreter exits, whichever comes first. A process killed outright (an actor ``ray.kill``
    ends) still leaves it, with a whole policy inside: its name carries the process id, so the next folder made
    removes those of processes that are gone (``rlsim.paths.process_folder``)."""

    def __init__(self, prefix: str = "rlsim-weights-") -> None:
        self._prefix = prefix
        self._path: Path | None = None
        self._cleanup: weakref.finalize | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = process_folder(self._prefix)
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._path, ignore_errors=True)
        return self._path

    def write(self, state: dict[str, np.ndarray]) -> Path:
        """Save ``state`` (parameter name -> array) and return the folder; replaces the previous weights."""
        if not state:
            raise ValueError("no weights to write: the trainer sent an empty state")
        tmp = self.path / "model.safetensors.tmp"
        save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(tmp))
        tmp.replace(self.path / "model.safetensors")
        return self.path

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()  # removes the folder once; later calls do nothing


def state_nbytes(state: dict[str, np.ndarray]) -> int:
    """Total size of ``state`` in bytes (what one weight sync moves)."""
    return int(sum(v.nbytes for v in state.values()))
