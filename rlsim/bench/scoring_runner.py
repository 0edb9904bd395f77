"""Run the scoring grid: check everything, then R rounds over all cells, each repeat a fresh process.

Cells are interleaved (round 1: A B C, round 2: A B C, ...) so slow drift of a shared machine
(thermal, other tenants) hits every cell alike instead of biasing whichever ran last. The GEMM
rates (fp32, and each other precision the runtimes use: ``rlsim.hardware.peaks``) are measured in their own
process before the first round and after the last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rlsim
from rlsim.bench.runtime_precision import needed_precisions
from rlsim.bench.scoring_config import BenchScoringConfig, Cell, check_grid, check_runtimes, grid_cells
from rlsim.bench.scoring_worker import WorkerJob, scorer_settings
from rlsim.errors import ConfigError, RlsimError
from rlsim.io import atomic_write_json
from rlsim.models import resolve_reward_model
from rlsim.scoring import SCORERS
from rlsim.scoring.base import int8_setting_problems
from rlsim.workloads import build_workload

Progress = Callable[[str, int, int], None]  # (what is running, done, total)


def preflight(cfg: BenchScoringConfig) -> tuple[list[Cell], dict[str, Any]]:
    """Every check that can fail, before any process starts; returns the cells and workload facts."""
    settings = scorer_settings(cfg.settings)
    problems = check_grid(cfg) + int8_setting_problems(settings, cfg.runtimes, where="settings.")
    if "http" in cfg.runtimes:  # the server wraps another runtime, which must be installed too
        problems += check_runtimes([settings.server_runtime])
    if problems:
        raise ConfigError(problems, source="rlsim bench scoring")
    cells = grid_cells(cfg)
    texts = build_workload(cfg.workload).texts
    lengths = workload_lengths(cfg, texts)
    longest = max(lengths)
    small = sorted({c.token_budget for c in cells if c.token_budget is not None and c.token_budget < longest})
    if small:
        raise RlsimError(
            f"token budget(s) {small} are smaller than one sequence: the workload's longest text is "
            f"{longest} tokens after truncation; use budgets >= {longest}"
        )
    text_rewards = [r for r in cfg.runtimes if r in SCORERS and SCORERS.info(r).kind != "model"]
    budgeted = sorted({c.token_budget for c in cells if c.token_budget is not None and c.runtime in text_rewards})
    if budgeted:  # rewards that are no model have no tokenizer: their batchers count characters
        chars = max(len(t) for t in texts)
        if min(budgeted) < chars:
            raise RlsimError(
                f"{', '.join(text_rewards)} count a text's characters (they have no tokenizer) and the workload's "
                f"longest text is {chars} characters: token budget(s) {[b for b in budgeted if b < chars]} hold "
                f"less than one; use budgets >= {chars} or leave the budget batchers out (--batchers fixed,sorted)"
            )
    info = {
        "sequences": len(lengths),
        "real_tokens": int(sum(lengths)),
        "mean_tokens": sum(lengths) / len(lengths),
        "max_tokens": longest,
        "min_tokens": min(lengths),
    }
    return cells, info


def workload_lengths(cfg: BenchScoringConfig, texts: list[str]) -> list[int]:
    """Token lengths of the workload's ``texts`` with the reward model's tokenizer and truncation limit."""
    from transformers import AutoTokenizer

    spec = resolve_reward_model(cfg.model)
    max_length = min(scorer_settings(cfg.settings).max_length or spec.max_length, spec.max_length)
    tokenizer = AutoTokenizer.from_pretrained(str(spec.path))
    ids = tokenizer(texts, add_special_tokens=True, truncation=True, max_length=max_length)["input_ids"]
    return [len(x) for x in ids]


def cell_job(cfg: BenchScoringConfig, cell: Cell) -> WorkerJob:
    return WorkerJob(
        mode="cell",
        model=cfg.model,
        runtime=cell.runtime,
        batcher=cell.batcher,
        batch_size=cell.batch_size,
        token_budget=cell.token_budget,
        workload=cfg.workload,
        settings=cfg.settings_for(cell.runtime),
        warmup_passes=cfg.warmup_passes,
    )


def run_grid(
    cfg: BenchScoringConfig, cells: list[Cell], out_dir: Path, progress: Progress | None = None
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Run every repeat; returns per-cell worker results (in round order) and the GEMM results.

    Raw results are rewritten to ``out_dir/raw_samples.json`` after each repeat, so an interrupted
    run keeps what it measured.
    """
    total = len(cells) * cfg.repeats + 2
    done = 0
    report = progress or (lambda what, d, t: None)
    server_runtime = scorer_settings(cfg.settings).server_runtime
    gemm_job = WorkerJob(mode="gemm", settings=cfg.settings, precisions=needed_precisions(cfg.runtimes, server_runtime))
    report("GEMM rate (before)", done, total)
    gemm = [run_worker(gemm_job, "GEMM measurement", cfg.worker_timeout_s)]
    done += 1
    raw: dict[str, list[dict[str, Any]]] = {c.label: [] for c in cells}
    for round_no in range(cfg.repeats):
        for cell in cells:
            report(f"round {round_no + 1}/{cfg.repeats}: {cell.label}", done, total)
            raw[cell.label].append(run_worker(cell_job(cfg, cell), f"cell {cell.label}", cfg.worker_timeout_s))
            done += 1
            atomic_write_json(out_dir / "raw_samples.json", {"gemm": gemm, "cells": raw})
    report("GEMM rate (after)", done, total)
    gemm.append(run_worker(gemm_job, "GEMM measurement", cfg.worker_timeout_s))
    report("done", total, total)
    return raw, gemm


def run_worker(job: WorkerJob, what: str, timeout_s: float) -> dict[str, Any]:
    """Run one worker process; its last stdout line is the result. Failures raise ``RlsimError``."""
    env = dict(os.environ)
    # The worker must import this same rlsim, installed or run from a source tree.
    root = str(Path(rlsim.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "rlsim.bench.scoring_worker", job.model_dump_json()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise RlsimError(
            f"{what} ran past {timeout_s:.0f} s and was stopped; use a smaller workload (--count) "
            "or raise --worker-timeout"
        ) from None
    result = last_json_line(proc.stdout)
    if result is None or not result.get("ok"):
        detail = (result or {}).get("error") or proc.stderr.strip()[-2000:] or f"exit status {proc.returncode}"
        raise RlsimError(f"{what} failed: {detail}")
    return result


def last_json_line(stdout: str) -> dict[str, Any] | None:
    """The last stdout line that is a JSON object (libraries may print before it)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None
