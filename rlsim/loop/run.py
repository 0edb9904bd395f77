"""``run_loop``: a ``LoopSession`` with a progress bar, and every output rewritten after each step.

``results.json``, ``timeline.json`` and ``report.md`` are replaced atomically after every step, so
Ctrl-C (or a failed step) leaves every completed step readable; the PNGs are drawn at the end, and
also when the run stops early.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

import rlsim
from rlsim.errors import RlsimError
from rlsim.io import atomic_write_json, atomic_write_text
from rlsim.loop.config import RunConfig
from rlsim.loop.config.conventions import resolved_conventions
from rlsim.loop.driver import LoopSession
from rlsim.loop.outputs.records import overall_overhead
from rlsim.loop.outputs.report import render_markdown, write_async_figures, write_figures
from rlsim.loop.schedules.asynchronous.session import async_start
from rlsim.metrics.framework_names import UpdateFlops, measure_update_flops, verl_async_metrics, verl_metrics
from rlsim.metrics.tensorboard import ScalarLog
from rlsim.metrics.trace import run_trace
from rlsim.models import resolve_policy
from rlsim.placement import resolve_placement
from rlsim.progress import LineProgress, make_console
from rlsim.run_results import RunResults, StepRecord
from rlsim.schedule_kinds import schedule_kind


class RunOutputs:
    """The files of one run in ``out``; ``results`` is the ``results.json`` content (typed)."""

    def __init__(self, out: Path, config: RunConfig, resume: bool = False) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict[str, Any]] = []
        self.flops: UpdateFlops | None = None  # for perf/mfu/actor, once measured
        self.scalars: ScalarLog | None = None  # --tensorboard
        self.previous: RunResults | None = None  # the results a --resume continues
        self._group_size = config.workload.group_size
        self.results = RunResults(
            rlsim_version=rlsim.__version__,
            config=config.model_dump(mode="json"),
            complete=False,
            steps=[],
            overhead_fraction=0.0,
            faults={"injected": 0, "survived": 0},
        )
        if config.trainer.algorithm != "grpo":
            self.results.algorithm = config.trainer.algorithm
        if config.trainer.conventions != "rlsim":  # as algorithm: a default run keeps its earlier keys
            self.results.conventions = resolved_conventions(config)
        if resume:
            self._load_previous()
        self.flush()

    @property
    def next_step(self) -> int:
        return len(self.results.steps) + 1

    def _load_previous(self) -> None:
        """Take over the steps of an earlier run of the same config in ``out`` (``--resume``)."""
        path = self.out / "results.json"
        if not path.is_file():
            raise RlsimError(f"--resume: {path} does not exist; run without --resume to start a new run there")
        old = RunResults.read(path)
        self.previous = old
        mine = self.results.config
        # steps may grow and faults may be dropped on resume; anything else would mix two experiments.
        differ = sorted(
            k for k in set(mine) | set(old.config) if k not in ("steps", "faults") and mine.get(k) != old.config.get(k)
        )
        if differ:
            raise RlsimError(
                f"--resume: {self.out} holds a run of a different config ({', '.join(differ)} differ); resume with "
                "the same config file and --set overrides, or choose a new --out"
            )
        timeline = self.out / "timeline.json"
        self.rows = json.loads(timeline.read_text())["events"] if timeline.is_file() else []
        self.results.steps = list(old.steps)
        if old.async_ is not None:  # schedule async: kept until the resumed run's first step merges into them
            self.results.async_, self.results.rollouts_total = old.async_, old.rollouts_total
        self.results.resumed_at_step = self.next_step
        self.results.faults_before_resume = dict(old.faults)
        self.results.faults = dict(old.faults)
        if self.results.steps:
            self.results.overhead_fraction = round(overall_overhead(self.results.steps), 6)

    def update(self, **fields: Any) -> None:
        """Set top-level ``results.json`` fields (validated: a placement dict becomes a PlacementRecord)."""
        for key, value in fields.items():
            setattr(self.results, key, value)
        self.flush()

    def add_step(self, record: StepRecord, rows: list[dict[str, Any]]) -> None:
        record.metrics = verl_metrics(record.model_dump(mode="json"), self.flops)
        if record.policy_version is not None:  # schedule async: verl's fully async keys too
            record.metrics.update(verl_async_metrics(record, self.results.steps, self._group_size))
        if self.scalars is not None:
            self.scalars.add(record.step, record.metrics)
        steps = self.results.steps
        steps.append(record)
        self.rows += rows
        self.results.overhead_fraction = round(overall_overhead(steps), 6)
        # Step 1 carries first-step costs (optimizer state, allocator growth) even after warm-up. (A planner run on
        # warm actors starts later: its steps all count.)
        later = [s for s in steps if s.step > 1]
        self.results.overhead_fraction_after_step1 = round(overall_overhead(later), 6) if later else None
        self.flush()

    def flush(self, figures: list[str] | None = None) -> None:
        atomic_write_json(self.out / "results.json", self.results.dump())
        atomic_write_json(self.out / "timeline.json", {"events": self.rows})
        atomic_write_json(
            self.out / "trace.json", run_trace(self.rows, [s.model_dump(mode="json") for s in self.results.steps])
        )
        atomic_write_text(self.out / "report.md", render_markdown(self.results, figures or []))

    def finish(self) -> None:
        self.flush(write_figures(self.out, self.results, self.rows) + write_async_figures(self.out, self.rows))


def run_loop(
    config: RunConfig,
    out: Path,
    console: Console | None = None,
    show_progress: bool = True,
    session: LoopSession | None = None,
    resume: bool = False,
    resume_hint: str = "rerun the same command with --resume",
    tensorboard: Path | None = None,
) -> RunResults:
    """Run steps up to ``config.steps``; returns the final ``results.json`` content.

    ``session``: an already started session to run on, with actors built for a config like this one (it
    takes ``config``, an async run gets a pipeline of its own, and it is left open); by default a new one is
    started for ``config`` and closed at the end, also on errors and Ctrl-C. ``resume``: continue the
    run saved in ``out`` after its last completed step (faults are not injected again at or before it).
    ``tensorboard``: a folder for each step's verl-named metrics as TensorBoard scalars.
    """
    console = console or make_console(stderr=True)
    outputs = RunOutputs(out, config, resume=resume)
    first = outputs.next_step
    own = session is None
    if session is None:
        session = LoopSession(_faults_from(config, first) if resume else config)
    else:  # a session shared by several runs (tests, the planner's validation runs): this run's settings
        session.config, session.async_run = config, None
    if schedule_kind(config.schedule).pipelined:  # checked before anything starts: an inexact resume is refused
        session.async_start = async_start(config, outputs.out, outputs.previous)
    try:
        outputs.scalars = ScalarLog(tensorboard) if tensorboard is not None else None
        if own and first <= config.steps:
            with console.status("starting Ray and the actors (vLLM's engine takes ~35 s on 2 cores)..."):
                session.start()
        outputs.update(startup_s={k: round(v, 3) for k, v in session.startup_s.items()}, **session.describe())
        _measure_peak(outputs, config)
        _steps(session, outputs, console, show_progress, first, config.steps, resume_hint)
        outputs.update(complete=True, faults=_faults(session, outputs.results.faults_before_resume))
    finally:
        try:
            outputs.results.faults = _faults(session, outputs.results.faults_before_resume)
            outputs.finish()
        finally:
            if outputs.scalars is not None:
                outputs.scalars.close()
            if own:
                session.close()
    return outputs.results


def _measure_peak(outputs: RunOutputs, config: RunConfig) -> None:
    """The GEMM peak behind ``perf/mfu/actor``, on the trainer's thread count, before the first step."""
    pool = config.placement.pool or sorted(os.sched_getaffinity(0))
    threads = resolve_placement(config.placement, pool)["trainer"].threads
    outputs.flops = measure_update_flops(
        resolve_policy(config.policy.model), config.trainer.epochs, threads, config.trainer.device
    )
    if outputs.flops is not None:
        outputs.update(gemm_peak_gflops=round(outputs.flops.peak_flops / 1e9, 2), gemm_peak_threads=threads)


def _faults_from(config: RunConfig, first: int) -> RunConfig:
    """``config`` without the faults of steps before ``first + 1``: the stopped run already injected them."""
    f = config.faults
    kept = f.model_copy(
        update={
            "kill_scorer_steps": [s for s in f.kill_scorer_steps if s > first],
            "kill_http_server_steps": [s for s in f.kill_http_server_steps if s > first],
            "stall_http_server_steps": [s for s in f.stall_http_server_steps if s > first],
            "kill_rollout_step": f.kill_rollout_step if (f.kill_rollout_step or 0) > first else None,
        }
    )
    return config.model_copy(update={"faults": kept})


def _steps(
    session: LoopSession, outputs: RunOutputs, console: Console, show_progress: bool, first: int, last: int, hint: str
) -> None:
    cfg = session.config
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with LineProgress(*columns, console=console, disable=not show_progress, transient=False) as bar:
        steps_task = bar.add_task("steps", total=last, completed=first - 1)
        for step in range(first, last + 1):
            total = cfg.workload.prompts_per_step * cfg.workload.group_size
            task = bar.add_task(f"step {step}: generate", total=total)

            def note(phase: str, done: int, of: int, task: Any = task, step: int = step) -> None:
                bar.update(task, description=f"step {step}: {phase}", completed=done if phase != "update" else of)

            try:
                record, rows = session.step(step, progress=note)
            except RlsimError as err:
                saved = (
                    f"steps 1..{step - 1} are saved in {outputs.out}/results.json" if step > 1 else "no step completed"
                )
                raise RlsimError(f"step {step} failed: {err}\n{saved}; to continue: {hint}") from None
            bar.update(task, completed=total, description=f"step {step}: {record.time_s.total:.1f} s")
            outputs.add_step(record, rows)
            async_run = getattr(session, "async_run", None)  # schedule async: run-wide records after every step
            if async_run is not None:
                outputs.update(**async_run.summary())
            bar.advance(steps_task)


def _faults(session: LoopSession, before: dict[str, int] | None = None) -> dict[str, int]:
    """This session's fault counts, added to ``before`` (the counts of the run a ``--resume`` continues)."""
    now = dict(session.backend.faults) if session.backend else {}
    total = {"injected": 0, "survived": 0}
    for counts in (before or {}, now):
        for k, v in counts.items():
            total[k] = total.get(k, 0) + int(v)
    return total


def summary_lines(results: RunResults) -> list[str]:
    """A few lines for the terminal: steps, mean step time and phases, overhead, where the files are."""
    steps = results.steps
    if not steps:
        return ["no step completed"]
    n = len(steps)
    mean = {
        k: sum(getattr(s.time_s, k) for s in steps) / n
        for k in ("total", "generate", "score", "update", "sync", "idle")
    }
    generated = sum(s.rollouts.generated for s in steps)
    dropped = sum(s.rollouts.dropped or 0 for s in steps)
    sync = steps[-1].sync
    t = results.rollouts_total
    stages = (
        "generated = scored = "
        + ("referenced = " if steps[-1].rollouts.referenced is not None else "")
        + ("valued = " if steps[-1].rollouts.valued is not None else "")
        + "trained"
        + (f" + {dropped} dropped with their rewards (on_timeout: drop)" if dropped else "")
    )
    counted = (
        f"{t.generated} rollouts generated = {t.trained} trained + {t.dropped_stale} dropped as stale + "
        + (f"{t.dropped_reward} dropped with their rewards + " if t.dropped_reward else "")
        + f"{t.unfinished_at_end} unfinished"
        if t
        else f"{generated} rollouts {stages}"
    )
    return [
        f"{n} steps ({results.config.get('schedule')}), {counted}",
        "mean step {total:.2f} s: generate {generate:.2f}, score {score:.2f}, update {update:.2f}, "
        "sync {sync:.2f}, idle {idle:.3f}".format(**mean),
        f"orchestration overhead {100 * results.overhead_fraction:.2f}% of step time; "
        f"weight sync: {sync.method if sync else 'not recorded'}",
    ]
