"""The shared figure helper: Agg backend, PNG bytes at one resolution, atomic files, figures closed."""

from __future__ import annotations

import struct
from pathlib import Path

from rlsim.metrics.plots import DPI, colours, png_bytes, pyplot, save_png, subplots


def _png_size(data: bytes) -> tuple[int, int]:
    # The IHDR chunk follows the 8-byte signature and its 8-byte header: width, height as big-endian uint32.
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_backend_is_agg_and_figures_are_closed() -> None:
    plt = pyplot()
    assert plt.get_backend().lower() == "agg"
    before = len(plt.get_fignums())
    fig, ax = subplots(2.0, 1.0)
    ax.plot([0, 1], [0, 1])
    png_bytes(fig)
    assert len(plt.get_fignums()) == before


def test_png_has_the_size_the_inches_and_dpi_give() -> None:
    fig, axes = subplots(3.0, 2.0, ncols=2)
    assert len(axes) == 2
    # 3 x 2 inches at DPI dots per inch; savefig without bbox_inches keeps the figure size.
    assert _png_size(png_bytes(fig)) == (3 * DPI, 2 * DPI)


def test_save_png_writes_atomically_and_leaves_no_temporary(tmp_path: Path) -> None:
    fig, _ = subplots(2.0, 1.0)
    target = save_png(fig, tmp_path / "sub" / "f.png", tight=True)
    assert target == tmp_path / "sub" / "f.png"
    assert _png_size(target.read_bytes()) == (2 * DPI, 1 * DPI)
    assert [p.name for p in target.parent.iterdir()] == ["f.png"]


def test_colours_follow_the_given_order_and_wrap_after_ten() -> None:
    names = [f"r{i}" for i in range(11)]
    c = colours(names)
    assert list(c) == names
    assert c["r0"] == c["r10"] and c["r0"] != c["r1"]
