"""Drive the experiment: R repeats (each a fresh Ray session), conditions interleaved, results kept current.

Order within a repeat: for each measured step, every runtime in turn (the order rotated from step to
step and repeat to repeat), and for each runtime its four conditions (the order reversed on odd
repeats; ``score_alone`` always right after ``gen_alone``, whose rollouts it scores). Slow drift of
a shared machine then falls on every runtime and condition alike instead of on whichever ran last.

``results.json`` and ``report.md`` are rewritten atomically after every runtime block, so an
interrupted experiment leaves every finished measurement readable; the PNGs are drawn at the end
(also when it stops early).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import rlsim
from rlsim.experiment.accounting import PoolAccountant
from rlsim.experiment.analysis import accounting_summary, runtime_figures
from rlsim.experiment.conditions import ConditionRunner, Measurement, Workload
from rlsim.experiment.config import CONDITIONS, ContentionConfig
from rlsim.experiment.capacity import per_repeat
from rlsim.experiment.report import conclusions, render_markdown
from rlsim.io import atomic_write_json, atomic_write_text
from rlsim.progress import LineProgress

UNITS = {
    "time": "seconds", "core_s": "core-seconds: one core busy for one second (process accounting)",
    "gen_slowdown": "fraction: generation tokens/s alone / together - 1 (0.25 = the same generation takes 25% longer "
                    "while scoring runs beside it)",
    "score_slowdown": "fraction: scoring rollouts/s (per busy second) alone / together - 1 (0.25 = 25% slower)",
    "step_time_change": "fraction: step time / baseline step time - 1",
    "freed_core_s": "core-seconds per together step: baseline scoring core-s - this runtime's",
    "freed_pool_share": "fraction of the pool's core-seconds in a baseline step (pool cores x step time)",
    "figures": "each {mean, ci_low, ci_high, n, method}: mean over repeats with a 95% CI; null where undefined",
}


def condition_order(repeat: int) -> list[str]:
    """Conditions of one runtime block: forwards on even repeats, alone-pair last on odd ones."""
    return list(CONDITIONS) if repeat % 2 == 0 else ["timeboxed", "together", "gen_alone", "score_alone"]


def runtime_order(runtimes: list[str], repeat: int, step: int, steps: int) -> list[str]:
    """``runtimes`` rotated by one more place for every (repeat, step) block."""
    k = (repeat * steps + step) % len(runtimes)
    return runtimes[k:] + runtimes[:k]


class ExperimentOutputs:
    """results.json + report.md in ``out``, recomputed from every measurement so far."""

    def __init__(self, out: Path, config: ContentionConfig, pool_cores: int) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.pool_cores = pool_cores
        self.rows: list[dict[str, Any]] = []
        self.sessions: list[dict[str, Any]] = []
        self.repeats_done = 0
        self.skipped: dict[str, str] = {}  # runtime -> why it could not run (first reason seen)
        self.started = time.time()
        self.results: dict[str, Any] = {}
        self.flush()

    def add(self, measurement: Measurement) -> None:
        self.rows.append(measurement.as_dict())

    def flush(self, complete: bool = False, figures: list[str] | None = None) -> None:
        self.results = build_results(self.rows, self.config, self.pool_cores, complete, self.repeats_done, self.skipped)
        self.results.update(sessions=self.sessions, elapsed_s=round(time.time() - self.started, 1))
        atomic_write_json(self.out / "results.json", self.results)
        atomic_write_text(self.out / "report.md", render_markdown(self.results, figures or []))


def build_results(rows: list[dict[str, Any]], config: ContentionConfig, pool_cores: int, complete: bool,
                  repeats_done: int, skipped: dict[str, str] | None = None) -> dict[str, Any]:
    """results.json content from measurement rows (``Measurement.as_dict()``): pure, so recorded
    rows can be re-analysed (and tested) without running anything."""
    s = config.contention
    per = per_repeat(rows)
    runtimes = {rt: runtime_figures(per, rt, s.baseline, pool_cores) for rt in s.runtimes if rt in per}
    results: dict[str, Any] = {
        "experiment": "contention", "rlsim_version": rlsim.__version__, "complete": complete,
        "baseline": s.baseline, "runtime_order": list(s.runtimes), "pool_cores": pool_cores,
        "repeats": s.repeats, "repeats_done": repeats_done, "steps_per_condition": s.steps_per_condition,
        "together_trials": s.together_trials,
        "timebox_budget_s": s.timebox.budget_s, "units": UNITS, "runtimes": runtimes, "skipped_runtimes": skipped or {},
        "accounting": accounting_summary(rows), "conclusions": [], "sessions": [], "elapsed_s": 0.0,
        "config": config.model_dump(mode="json"), "measurements": rows,
    }
    results["conclusions"] = conclusions(results)
    return results


def run_contention(config: ContentionConfig, out: Path, console: Console | None = None,
                   show_progress: bool = True) -> dict[str, Any]:
    """Run every repeat; returns the final results.json content."""
    from rlsim.experiment.session import ExperimentSession

    console = console or Console(stderr=True)
    s = config.contention
    loop = config.loop
    work = Workload(loop.workload.spec, loop.workload.prompts_per_step, loop.workload.group_size, loop.micro_batch,
                    s.timebox.micro_batch, s.timebox.budget_s)
    pool = loop.placement.pool or sorted(os.sched_getaffinity(0))  # as ExperimentSession resolves it
    outputs = ExperimentOutputs(out, config, len(pool))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    session: ExperimentSession | None = None
    complete = False
    try:
        with LineProgress(*columns, console=console, disable=not show_progress) as bar:
            per_runtime = s.steps_per_condition * (len(CONDITIONS) - 1 + s.together_trials)
            per_repeat_units = 1 + len(s.runtimes) * per_runtime
            task = bar.add_task("contention", total=s.repeats * per_repeat_units)
            for repeat in range(s.repeats):
                if session is None or s.session_per_repeat:
                    if session is not None:
                        session.close()
                    session = ExperimentSession(config, s.runtimes)
                    session.start(lambda msg, r=repeat: bar.update(task, description=f"repeat {r + 1}/{s.repeats}: "
                                                                                         f"{msg}"))
                outputs.sessions.append({"repeat": repeat, **session.describe()})
                for runtime, reason in session.failed.items():
                    outputs.skipped.setdefault(runtime, reason)
                bar.advance(task, advance=1 + len(session.failed) * per_runtime)
                _one_repeat(session, outputs, work, repeat, bar, task)
                outputs.repeats_done += 1
            complete = True
    finally:
        try:
            from rlsim.experiment.plots import write_figures

            outputs.flush(complete=complete)
            outputs.flush(complete=complete, figures=write_figures(outputs.out, outputs.results))
        finally:
            if session is not None:
                session.close()
    return outputs.results


def _one_repeat(session: Any, outputs: ExperimentOutputs, work: Workload, repeat: int, bar: Progress,
                task: Any) -> None:
    s = outputs.config.contention
    accountant = PoolAccountant(session.pool)
    runners = {rt: ConditionRunner(session.backend(rt), accountant, session.roots(rt), work, rt, repeat,
                                   s.settle_max_s)
               for rt in session.runtimes}
    for step in range(1, s.steps_per_condition + 1):
        for rt in runtime_order(list(session.runtimes), repeat, step, s.steps_per_condition):
            for condition in condition_order(repeat):
                trials = s.together_trials if condition == "together" else 1
                for trial in range(trials):
                    what = condition if trials == 1 else f"{condition} {trial + 1}/{trials}"
                    bar.update(task, description=f"repeat {repeat + 1}/{s.repeats} step {step}: {rt} {what}")
                    measurement = runners[rt].run(condition, step)
                    measurement.extra["trial"] = trial
                    outputs.add(measurement)
                    bar.advance(task)
            outputs.flush()
