"""Moving policy weights from the trainer to the generator: numpy arrays in, a safetensors folder out.

Weights travel as plain numpy arrays (Ray's object store moves them between nodes without copies on
one node); the generator's side writes them to a local folder its engine reloads from.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file


class WeightsFolder:
    """A private temporary folder holding the latest weights as ``model.safetensors``; removed on ``close``."""

    def __init__(self, prefix: str = "rlsim-weights-") -> None:
        self.path = Path(tempfile.mkdtemp(prefix=prefix))

    def write(self, state: dict[str, np.ndarray]) -> Path:
        """Save ``state`` (parameter name -> array) and return the folder; replaces the previous weights."""
        if not state:
            raise ValueError("no weights to write: the trainer sent an empty state")
        tmp = self.path / "model.safetensors.tmp"
        save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(tmp))
        tmp.replace(self.path / "model.safetensors")
        return self.path

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def state_nbytes(state: dict[str, np.ndarray]) -> int:
    """Total size of ``state`` in bytes (what one weight sync moves)."""
    return int(sum(v.nbytes for v in state.values()))
