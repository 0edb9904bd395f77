"""Drive the experiment: R repeats (each a fresh Ray session), conditions interleaved, results kept current.

Order within a repeat: for each measured step, every runtime in turn (the order rotated from step to
step and repeat to repeat), and for each runtime its four conditions (three under async: no
time-boxed one; the order reversed on odd repeats; ``score_alone`` always right after
``gen_alone``, whose rollouts it scores). Slow drift of a shared machine then falls on every
runtime and condition alike instead of on whichever ran last.

How many repeats: ``stopping.run_repeats`` decides after each one (a fixed count, or until every
compared runtime's freed-capacity CI meets ``contention.target_ci`` within ``contention.max_minutes``).

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
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

import rlsim
from rlsim.experiment.accounting import PoolAccountant
from rlsim.experiment.analysis import accounting_summary, runtime_figures
from rlsim.experiment.capacity import per_repeat
from rlsim.experiment.conditions import ConditionRunner, Measurement, Workload
from rlsim.experiment.config import CONDITIONS, ContentionConfig
from rlsim.experiment.fidelity_rank import attach_fidelity, ranking_sentences
from rlsim.experiment.fidelity_source import experiment_fidelity
from rlsim.experiment.plots import write_figures
from rlsim.experiment.report import conclusions, render_markdown
from rlsim.experiment.schedule_report import schedule_figures, schedule_units
from rlsim.experiment.stopping import (
    LoopOutcome,
    Precision,
    StopRule,
    precision_from_rows,
    projection,
    run_repeats,
    stopped_by,
)
from rlsim.fingerprint import machine_fingerprint
from rlsim.io import atomic_write_json, atomic_write_text
from rlsim.metrics.trace import experiment_trace
from rlsim.progress import LineProgress, make_console

UNITS = {
    "time": "seconds",
    "core_s": "core-seconds: one core busy for one second (process accounting)",
    "gen_slowdown": "fraction: generation tokens/s alone / together - 1 (0.25 = the same generation takes 25% longer "
    "while scoring runs beside it)",
    "score_slowdown": "fraction: scoring rollouts/s (per busy second) alone / together - 1 (0.25 = 25% slower)",
    "step_time_change": "fraction: step time / baseline step time - 1",
    "freed_core_s": "core-seconds per together step: baseline scoring core-s - this runtime's",
    "freed_pool_share": "fraction of the pool's core-seconds in a baseline step (pool cores x step time)",
    "figures": "each {mean, ci_low, ci_high, n, method}: mean over repeats with a 95% CI; null where undefined; "
    "method 'paired: ...' = per-repeat pairs with the baseline (or alone vs together), else unpaired",
    "precision": "freed core-s CI: half_width (core-s), half_width_fraction (of |mean|), target_half_width "
    "(target_ci x max(|mean|, 5% of the baseline's scoring core-s)), repeats_needed for it, stopped_by",
}
STOP_WORDS = {
    "repeats": "the fixed number of repeats was done",
    "target": "every compared runtime met the target",
    "minutes": "the next repeat would have ended past max_minutes",
}


def condition_order(repeat: int, conditions: tuple[str, ...] = CONDITIONS) -> list[str]:
    """Conditions of one runtime block: forwards on even repeats, alone-pair last on odd ones
    (``conditions``: those measured, ``ContentionConfig.conditions``)."""
    order = list(CONDITIONS) if repeat % 2 == 0 else ["timeboxed", "together", "gen_alone", "score_alone"]
    return [c for c in order if c in conditions]


def runtime_order(runtimes: list[str], repeat: int, step: int, steps: int) -> list[str]:
    """``runtimes`` rotated by one more place for every (repeat, step) block."""
    k = (repeat * steps + step) % len(runtimes)
    return runtimes[k:] + runtimes[:k]


class ExperimentOutputs:
    """results.json + report.md in ``out``, recomputed from every measurement so far."""

    def __init__(
        self, out: Path, config: ContentionConfig, pool_cores: int, fidelity: dict[str, Any] | None = None
    ) -> None:
        self.out = Path(out)
        self.fidelity = fidelity  # fidelity_source.experiment_fidelity: each runtime's, got before the repeats
        self.out.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.pool_cores = pool_cores
        self.rows: list[dict[str, Any]] = []
        self.spans: list[dict[str, Any]] = []  # every measured event (ConditionRunner.spans), for trace.json
        self.sessions: list[dict[str, Any]] = []
        self.repeats_done = 0
        self.skipped: dict[str, str] = {}  # runtime -> why it could not run (first reason seen)
        self.started = time.time()
        self.stop_reason: str | None = None
        self.results: dict[str, Any] = {}
        self.machine = machine_fingerprint()  # every figure belongs to the machine it was measured on
        self.flush()

    def add(self, measurement: Measurement) -> None:
        self.rows.append(measurement.as_dict())

    def flush(self, complete: bool = False, figures: list[str] | None = None) -> None:
        self.results = build_results(
            self.rows,
            self.config,
            self.pool_cores,
            complete,
            self.repeats_done,
            self.skipped,
            self.stop_reason,
            self.fidelity,
        )
        self.results.update(
            sessions=self.sessions, elapsed_s=round(time.time() - self.started, 1), machine=self.machine
        )
        atomic_write_json(self.out / "results.json", self.results)
        atomic_write_text(self.out / "report.md", render_markdown(self.results, figures or []))
        if self.spans:
            atomic_write_json(self.out / "trace.json", experiment_trace(self.spans))


def build_results(
    rows: list[dict[str, Any]],
    config: ContentionConfig,
    pool_cores: int,
    complete: bool,
    repeats_done: int,
    skipped: dict[str, str] | None = None,
    stop_reason: str | None = None,
    fidelity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """results.json content from measurement rows (``Measurement.as_dict()``): pure, so recorded
    rows can be re-analysed (and tested) without running anything. ``stop_reason``: why the repeats
    stopped (``stopping.stop_reason``), None while they go on. ``fidelity``: each runtime's reward
    fidelity (``fidelity_source.experiment_fidelity``), which the ranking (``fidelity_rank``) needs."""
    s = config.contention
    per = per_repeat(rows)
    runtimes = {
        rt: runtime_figures(per, rt, s.baseline, pool_cores) | schedule_figures(per, rt, s.baseline, pool_cores)
        for rt in s.runtimes
        if rt in per
    }
    precision = precision_from_rows(rows, list(runtimes), s.baseline, s.target_ci)
    for rt, p in precision.items():
        runtimes[rt]["precision"] = {**p.as_dict(), "target_ci": s.target_ci, "stopped_by": stopped_by(stop_reason, p)}
    results: dict[str, Any] = {
        "experiment": "contention",
        "rlsim_version": rlsim.__version__,
        "complete": complete,
        "baseline": s.baseline,
        "runtime_order": list(s.runtimes),
        "pool_cores": pool_cores,
        "repeats": s.repeats,
        "repeats_done": repeats_done,
        "stopping": {
            "repeats": s.repeats,
            "target_ci": s.target_ci,
            "max_minutes": s.max_minutes,
            "reason": stop_reason,
            "words": STOP_WORDS.get(stop_reason or "", "still running"),
        },
        "steps_per_condition": s.steps_per_condition,
        "together_trials": s.together_trials,
        "timebox_budget_s": s.timebox.budget_s,
        "units": UNITS | schedule_units(runtimes),
        "runtimes": runtimes,
        "skipped_runtimes": skipped or {},
        "accounting": accounting_summary(rows),
        "conclusions": [],
        "sessions": [],
        "elapsed_s": 0.0,
        "config": config.model_dump(mode="json"),
        "measurements": rows,
    }
    if config.loop.trainer.algorithm != "grpo":
        results["algorithm"] = config.loop.trainer.algorithm
    if config.is_async:
        results.update(schedule="async", async_updates=s.async_updates)
    attach_fidelity(results, fidelity)
    results["conclusions"] = conclusions(results) + ranking_sentences(results["ranking"])
    return results


def run_contention(
    config: ContentionConfig, out: Path, console: Console | None = None, show_progress: bool = True
) -> dict[str, Any]:
    """Run repeats until the stopping rule says stop; returns the final results.json content."""
    s = config.contention
    loop = config.loop
    work = Workload(
        loop.workload.spec,
        loop.workload.prompts_per_step,
        loop.workload.group_size,
        loop.micro_batch,
        s.timebox.micro_batch,
        s.timebox.budget_s,
    )
    pool = loop.placement.pool or sorted(os.sched_getaffinity(0))  # as ExperimentSession resolves it
    console = console or make_console(stderr=True)
    fidelity = experiment_fidelity(config, console.print)  # before Ray starts: scoring it alone, not contending
    outputs = ExperimentOutputs(out, config, len(pool), fidelity)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    repeats = _Repeats(outputs, work)
    complete = False
    try:
        with LineProgress(*columns, console=console, disable=not show_progress) as bar:
            repeats.bar, repeats.task = bar, bar.add_task("contention", total=repeats.units(s.repeats or 3))
            rule = StopRule(s.repeats, s.target_ci, s.max_minutes)
            outcome = run_repeats(rule, repeats.run, repeats.measure, time.monotonic, repeats.after)
            outputs.stop_reason = outcome.reason
            complete = True
    finally:
        try:
            outputs.flush(complete=complete)
            outputs.flush(complete=complete, figures=write_figures(outputs.out, outputs.results))
        finally:
            repeats.close()
    return outputs.results


class _Repeats:
    """One repeat at a time for ``run_repeats``: its Ray session, its conditions, the progress line."""

    def __init__(self, outputs: ExperimentOutputs, work: Workload) -> None:
        self.outputs, self.work = outputs, work
        self.s = outputs.config.contention
        self.session: Any = None
        self.bar: Any = None
        self.task: Any = None
        self.suffix = ""  # current half-widths and the projection, after every description

    @property
    def per_runtime(self) -> int:
        """Progress units of one runtime in one repeat (one per measured condition)."""
        conditions = self.outputs.config.conditions
        return self.s.steps_per_condition * (len(conditions) - 1 + self.s.together_trials)

    def units(self, repeats: int) -> int:
        return repeats * (1 + len(self.s.runtimes) * self.per_runtime)  # 1: the session start

    def describe(self, repeat: int, what: str) -> None:
        of = f"/{self.s.repeats}" if self.s.repeats else ""
        self.bar.update(self.task, description=f"repeat {repeat + 1}{of}: {what}{self.suffix}")

    def run(self, repeat: int) -> None:
        from rlsim.experiment.session import ExperimentSession

        s = self.s
        if s.repeats is None:  # open-ended: the bar's end moves one repeat at a time
            self.bar.update(self.task, total=max(self.units(repeat + 1), self.units(3)))
        if self.session is None or s.session_per_repeat:
            self.close()
            self.session = ExperimentSession(self.outputs.config, s.runtimes)
            self.session.start(lambda msg: self.describe(repeat, msg))
        self.outputs.sessions.append({"repeat": repeat, **self.session.describe()})
        for runtime, reason in self.session.failed.items():
            self.outputs.skipped.setdefault(runtime, reason)
        self.bar.advance(self.task, advance=1 + len(self.session.failed) * self.per_runtime)
        _one_repeat(self.session, self.outputs, self.work, repeat, self)
        self.outputs.repeats_done += 1

    def measure(self) -> dict[str, Precision]:
        return precision_from_rows(self.outputs.rows, self.s.runtimes, self.s.baseline, self.s.target_ci)

    def after(self, state: LoopOutcome) -> None:
        self.suffix = projection(state.precision, state.durations, self.s.target_ci)
        self.describe(state.repeats_done - 1, "done")
        self.outputs.flush()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def _one_repeat(session: Any, outputs: ExperimentOutputs, work: Workload, repeat: int, repeats: _Repeats) -> None:
    s = outputs.config.contention
    accountant = PoolAccountant(session.pool)
    runners = {}
    for rt in session.runtimes:
        backend = session.backend(rt)
        together = session.together(backend, work)
        roots = session.roots(rt)
        runners[rt] = ConditionRunner(backend, accountant, roots, work, rt, repeat, s.settle_max_s, together)
    for step in range(1, s.steps_per_condition + 1):
        for rt in runtime_order(list(session.runtimes), repeat, step, s.steps_per_condition):
            for condition in condition_order(repeat, outputs.config.conditions):
                trials = s.together_trials if condition == "together" else 1
                for trial in range(trials):
                    what = condition if trials == 1 else f"{condition} {trial + 1}/{trials}"
                    repeats.describe(repeat, f"step {step}: {rt} {what}")
                    measurement = runners[rt].run(condition, step)
                    measurement.extra["trial"] = trial
                    outputs.add(measurement)
                    outputs.spans += runners[rt].spans
                    runners[rt].spans.clear()
                    repeats.bar.advance(repeats.task)
            outputs.flush()
