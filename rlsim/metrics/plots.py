"""The one matplotlib set-up every rlsim figure goes through: Agg backend, one PNG style, atomic files.

The run report (gantt, breakdown), the contention experiment, the scoring benchmark and the planner all draw
with this module, so a PNG looks and is written the same wherever it comes from. matplotlib is imported
here, on first use, so importing a module that can plot stays cheap.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from rlsim.io import atomic_write_bytes

# One resolution for every figure: sharp enough for a README, small enough to commit.
DPI = 120


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed: runs in Ray workers and over ssh)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def subplots(width: float, height: float, ncols: int = 1, constrained: bool = False) -> tuple[Any, Any]:
    """A new figure of ``width`` x ``height`` inches with ``ncols`` axes side by side: ``(fig, ax_or_axes)``."""
    return pyplot().subplots(1, ncols, figsize=(width, height), constrained_layout=constrained)


def colours(names: list[str]) -> dict[str, Any]:
    """One colour per name from matplotlib's tab10 cycle, in the order given (wraps after ten)."""
    pyplot()
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {name: cmap(i % 10) for i, name in enumerate(names)}


def png_bytes(fig: Any, tight: bool = False) -> bytes:
    """Render ``fig`` as PNG bytes and close it (an open figure holds its memory until closed)."""
    if tight:
        fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    pyplot().close(fig)
    return buf.getvalue()


def save_png(fig: Any, path: str | os.PathLike[str], tight: bool = False) -> Path:
    """Write ``fig`` to ``path`` atomically (a reader never sees a half-written PNG) and close it."""
    return atomic_write_bytes(path, png_bytes(fig, tight=tight))
