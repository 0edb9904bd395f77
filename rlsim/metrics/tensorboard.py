"""``rlsim run --tensorboard DIR``: each step's verl-named metrics as TensorBoard scalars."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError


class ScalarLog:
    """One event file in ``log_dir``; ``add(step, metrics)`` writes and flushes a step's scalars, so a
    TensorBoard watching the folder sees each step as it finishes."""

    def __init__(self, log_dir: str | Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            raise RlsimError(
                f"--tensorboard needs the tensorboard package ({err}); install it with "
                "`pip install -r requirements/cpu.txt`, or drop --tensorboard"
            ) from None
        self._writer: Any = SummaryWriter(log_dir=str(log_dir))

    def add(self, step: int, metrics: Mapping[str, float]) -> None:
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, global_step=step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
