"""Time real scorers over a grid of batch sizes and text lengths (the measuring side of ``rlsim profile``).

This is the one planner module that runs models: it imports ``rlsim.scoring`` and
``rlsim.models`` (and through them torch / onnxruntime) *inside* its functions, so the simulation
and ``rlsim plan`` never load them. Each cell is warmed up, then timed ``repeats`` times; every
timed call is one ``LatencySample`` whose padded tokens come from the scorer's own counters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlsim.models import resolve_reward_model
from rlsim.planner.measure import machine_load
from rlsim.planner.profile.schema import Device, LatencySample
from rlsim.scoring.base import ScorerSettings, make_scorer

if TYPE_CHECKING:
    from rlsim.planner.measure.loop_set import QuietGate

_WORDS = ("reward", "policy", "the", "answer", "step", "value", "model", "token", "score", "is", "good", "and")


@dataclass(frozen=True)
class ScorerGrid:
    """Batch sizes (sequences), text lengths (about that many tokens each), threads or GPUs to use."""

    batch_sizes: Sequence[int]
    lengths: Sequence[int]
    units: Sequence[int]
    repeats: int = 3
    warmup: int = 1


def synthetic_text(tokens: int, salt: int = 0) -> str:
    """A text of roughly ``tokens`` word-piece tokens (common English words are one token each)."""
    return " ".join(_WORDS[(i + salt) % len(_WORDS)] for i in range(max(tokens - 2, 1)))


def measure_runtime(
    runtime: str,
    reward_model: str,
    device: Device,
    grid: ScorerGrid,
    on_cell: Callable[[str], None] | None = None,
    quiet: QuietGate | None = None,
    options: dict[str, Any] | None = None,
    label: str | None = None,
) -> tuple[list[LatencySample], int]:
    """Time ``runtime`` on every grid cell; returns the samples and the model's max length (tokens).

    ``quiet``: before each cell, wait for the cores to be idle (``QuietGate.wait``).
    Every sample records the share of the cores other programs took during it (``foreign_share``),
    so a fit can leave disturbed calls out. ``options``: the reward section of a reward that is no model
    (a ``genrm`` judge); its calls count the texts' own tokens (the rollout's, as the planner feeds the
    model), not the judge's prompt. ``label``: the name progress shows (default ``runtime``).
    """
    spec = resolve_reward_model(reward_model)
    samples: list[LatencySample] = []
    rollout_tokens = options is not None
    for units in grid.units:
        settings = ScorerSettings(device=device, threads=int(units), options=dict(options or {}))
        scorer = make_scorer(runtime, spec, settings)
        try:
            for batch in grid.batch_sizes:
                for length in grid.lengths:
                    texts = [synthetic_text(length, salt=i) for i in range(batch)]
                    if quiet is not None:
                        quiet.wait()
                    samples.extend(_time_cell(scorer, texts, units, grid, length, rollout_tokens))
                    if on_cell:
                        on_cell(f"{label or runtime} x{units} b{batch} len{length}")
        finally:
            scorer.close()
    return samples, int(spec.max_length)


def timed_call(call: Callable[[], object]) -> tuple[float, float | None]:
    """Seconds ``call()`` took, and the share of all cores other programs took meanwhile (None: unknown)."""
    cpu0, load0 = time.process_time(), machine_load.sample()
    t0 = time.perf_counter()
    call()
    elapsed = time.perf_counter() - t0
    # This process's CPU time (every thread of the model) is ours; the rest of the busy time is others'.
    return elapsed, machine_load.foreign_share(load0, machine_load.sample(), time.process_time() - cpu0)


def _time_cell(
    scorer: object, texts: list[str], units: float, grid: ScorerGrid, length: int, rollout_tokens: bool = False
) -> list[LatencySample]:
    """Warm up, then time ``grid.repeats`` calls; a scorer that keeps no token counts (a remote
    server), or ``rollout_tokens``, is counted at ``length`` tokens a text."""
    for _ in range(grid.warmup):
        scorer.score_batch(texts)  # type: ignore[attr-defined]
    out = []
    for _ in range(grid.repeats):
        before = scorer.stats.padded_tokens  # type: ignore[attr-defined]
        elapsed, share = timed_call(lambda: scorer.score_batch(texts))  # type: ignore[attr-defined]
        padded = scorer.stats.padded_tokens - before  # type: ignore[attr-defined]
        padded = padded if padded > 0 and not rollout_tokens else len(texts) * length
        out.append(
            LatencySample(
                batch=len(texts),
                padded_tokens=int(padded),
                latency_s=elapsed,
                units=units,
                foreign_share=None if share is None else round(share, 4),
            )
        )
    return out
