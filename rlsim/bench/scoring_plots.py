"""PNG plots of a scoring benchmark result (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from typing import Any

from rlsim.metrics.plots import colours as runtime_colours
from rlsim.metrics.plots import png_bytes, subplots


def throughput_bars(result: dict[str, Any]) -> bytes:
    """Sequences/s per cell with 95% CI whiskers; the baseline cell is hatched."""
    cells = result["cells"]
    colours = runtime_colours(list(dict.fromkeys(c["runtime"] for c in cells)))
    fig, ax = subplots(max(6.0, 0.55 * len(cells) + 2), 4.5, constrained=True)
    means = [c["throughput_seq_s"]["mean"] for c in cells]
    err = [[m - c["throughput_seq_s"]["ci_low"] for m, c in zip(means, cells, strict=True)],
           [c["throughput_seq_s"]["ci_high"] - m for m, c in zip(means, cells, strict=True)]]  # fmt: skip
    bars = ax.bar(range(len(cells)), means, yerr=err, capsize=3, color=[colours[c["runtime"]] for c in cells])
    for bar, c in zip(bars, cells, strict=True):
        if c["cell"] == result["baseline"]:
            bar.set_hatch("//")
    ax.set_xticks(range(len(cells)), [c["cell"] for c in cells], rotation=60, ha="right", fontsize=8)
    ax.set_ylim(bottom=0)  # a t-interval from few repeats can dip below 0; throughput cannot
    ax.set_ylabel("sequences / s (mean, 95% CI)")
    ax.set_title(f"Scoring throughput, {result['model']} (hatched: baseline {result['baseline']})")
    return png_bytes(fig)


def throughput_vs_batch(result: dict[str, Any]) -> bytes:
    """Sequences/s against mean batch size, one line per runtime x batcher (token-budget: per budget)."""
    cells = result["cells"]
    runtimes = list(dict.fromkeys(c["runtime"] for c in cells))
    colours = runtime_colours(runtimes)
    markers = {"fixed": "o", "sorted": "s", "token-budget": "^"}
    fig, ax = subplots(7.0, 4.5, constrained=True)
    for runtime in runtimes:
        for batcher, marker in markers.items():
            pts = sorted(
                (c["mean_batch_size"], c) for c in cells if c["runtime"] == runtime and c["batcher"] == batcher
            )
            if not pts:
                continue
            xs = [x for x, _ in pts]
            ys = [c["throughput_seq_s"]["mean"] for _, c in pts]
            lo = [y - c["throughput_seq_s"]["ci_low"] for y, (_, c) in zip(ys, pts, strict=True)]
            hi = [c["throughput_seq_s"]["ci_high"] - y for y, (_, c) in zip(ys, pts, strict=True)]
            ax.errorbar(xs, ys, yerr=[lo, hi], marker=marker, capsize=3, color=colours[runtime],
                        linestyle="-" if batcher != "token-budget" else ":", label=f"{runtime} {batcher}")  # fmt: skip
    ax.set_xscale("log", base=2)
    sizes = sorted({round(c["mean_batch_size"], 1) for c in cells})
    ax.set_xticks(sizes, [f"{x:g}" for x in sizes])
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.set_xlabel("mean batch size (sequences)")
    ax.set_ylabel("sequences / s (mean, 95% CI)")
    ax.set_title("Throughput vs batch size per runtime")
    ax.legend(fontsize=7, ncol=2)
    return png_bytes(fig)


def padding_waste(result: dict[str, Any]) -> bytes:
    """Padding waste per batcher setting (it depends on the plan, not on the runtime)."""
    seen: dict[str, float] = {}
    for c in result["cells"]:
        seen.setdefault(c["cell"].split("/", 1)[1], c["padding_waste"])
    fig, ax = subplots(max(5.0, 0.6 * len(seen) + 2), 4.0, constrained=True)
    ax.bar(range(len(seen)), [100.0 * v for v in seen.values()], color="tab:gray")
    ax.set_xticks(range(len(seen)), list(seen), rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("padding waste (% of computed tokens)")
    ax.set_title("Padding waste per batcher")
    return png_bytes(fig)


def plot_all(result: dict[str, Any]) -> dict[str, bytes]:
    return {
        "throughput.png": throughput_bars(result),
        "throughput_vs_batch.png": throughput_vs_batch(result),
        "padding_waste.png": padding_waste(result),
    }
