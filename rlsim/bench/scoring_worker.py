"""One benchmark repeat in a fresh process: ``python -m rlsim.bench.scoring_worker JOB_JSON``.

``cell`` mode loads the scorer once, warms up over the workload, then times one pass of
``score_texts`` (token lengths, planning and every batch). ``gemm`` mode times fp32 matrix
products with the same thread count, and those of the other precisions the grid's runtimes use
(``peaks``). The last stdout line is one JSON object: ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}`` (exit status 2 for a user-fixable problem, 1 for a bug).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from dataclasses import fields
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlsim.batching import make_batcher, score_texts, token_lengths
from rlsim.bench.scoring_config import import_plugins
from rlsim.errors import RlsimError
from rlsim.hardware.flops import shape_of_model, workload_flops
from rlsim.hardware.gemm import best_gemm_gflops
from rlsim.hardware.peaks import measure_peaks
from rlsim.models import resolve_reward_model
from rlsim.scoring import SCORERS, make_scorer
from rlsim.scoring.base import ScorerSettings
from rlsim.workloads import WorkloadSpec, build_workload


class WorkerJob(BaseModel):
    """What one worker process does; built by the runner, never by hand."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["cell", "gemm"]
    model: str = "minilm-rm"
    runtime: str = "eager"
    batcher: str = "fixed"
    batch_size: int | None = None
    token_budget: int | None = None
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    settings: dict[str, Any] = Field(default_factory=dict)
    warmup_passes: int = 1
    precisions: list[str] = Field(default_factory=list)  # gemm: peak rates beside fp32 (rlsim.hardware.peaks)


def scorer_settings(values: dict[str, Any]):
    """``ScorerSettings`` from a JSON-friendly dict; unknown keys are an error naming the valid ones."""
    valid = {f.name for f in fields(ScorerSettings)}
    unknown = sorted(set(values) - valid)
    if unknown:
        raise RlsimError(f"unknown scorer setting(s) {unknown}; valid: {', '.join(sorted(valid))}")
    values = dict(values)
    if "compile_buckets" in values:
        values["compile_buckets"] = tuple(values["compile_buckets"])
    return ScorerSettings(**values)


def run_cell(job: WorkerJob) -> dict[str, Any]:
    """Load, warm up, time one pass; returns timings (seconds), token counts and the rewards."""
    spec = resolve_reward_model(job.model)
    texts = build_workload(job.workload).texts
    batcher = make_batcher(job.batcher, size=job.batch_size, budget=job.token_budget)
    t0 = time.perf_counter()
    scorer = make_scorer(job.runtime, spec, scorer_settings(job.settings))
    load_s = time.perf_counter() - t0
    try:
        lengths = token_lengths(scorer, texts)
        try:
            # A reward that is no model computes no reward-model FLOPs: no fraction of a GEMM peak applies.
            is_model = SCORERS.info(job.runtime).kind == "model"
            flops: float | None = workload_flops(shape_of_model(spec.path), lengths) if is_model else None
        except RlsimError:
            flops = None  # unknown architecture: throughput is still measured, the fraction is not
        t0 = time.perf_counter()
        for _ in range(job.warmup_passes):
            score_texts(scorer, texts, batcher, lengths=lengths)
        warmup_s = time.perf_counter() - t0
        before = (scorer.stats.compile_s, scorer.stats.tokens, scorer.stats.padded_tokens)
        rewards, report = score_texts(scorer, texts, batcher)
        timed_compile_s = scorer.stats.compile_s - before[0]
        # What the runtime really computed: ``compile`` pads further, up to its length buckets.
        real, padded = scorer.stats.tokens - before[1], scorer.stats.padded_tokens - before[2]
    finally:
        scorer.close()
    return {
        "wall_s": report.total_s,
        "sequences": report.sequences,
        "real_tokens": report.real_tokens,
        "padded_tokens": report.padded_tokens,
        "padding_waste": report.padding_waste,
        "computed_padding_waste": (padded - real) / padded if padded > 0 else None,
        "batch_sizes": report.batch_sizes,
        "batch_latencies_s": report.batch_latencies_s,
        "lengths_s": report.lengths_s,
        "flops": flops,
        "load_s": load_s,
        "warmup_s": warmup_s,
        "compile_s": scorer.stats.compile_s,
        "timed_compile_s": timed_compile_s,
        "rewards": rewards.tolist(),
    }


def run_gemm(job: WorkerJob) -> dict[str, Any]:
    """The best fp32 GEMM rate (``rlsim.hardware.gemm.best_gemm_gflops``: torch's or MLAS's), with ``peaks``: each
    of ``job.precisions`` measured the same way or skipped with the reason."""
    settings = scorer_settings(job.settings)
    threads = settings.resolved_threads()
    result = best_gemm_gflops(threads, device=settings.device)
    result["peaks"] = measure_peaks(job.precisions, threads, settings.device)
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 1:
            raise RlsimError("usage: python -m rlsim.bench.scoring_worker JOB_JSON")
        job = WorkerJob.model_validate_json(args[0])
        import_plugins()
        result: dict[str, Any] = run_gemm(job) if job.mode == "gemm" else run_cell(job)
        result["ok"], code = True, 0
    except RlsimError as err:
        result, code = {"ok": False, "error": str(err)}, 2
    except Exception as err:  # noqa: BLE001 - the runner needs a JSON answer whatever happened
        traceback.print_exc()
        result, code = {"ok": False, "error": f"{type(err).__name__}: {err}"}, 1
    print(json.dumps(result), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
